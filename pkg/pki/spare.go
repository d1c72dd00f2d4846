/*
Copyright The argocd-agent-addon Authors.
SPDX-License-Identifier: Apache-2.0
*/

package pki

import (
	"context"
	"sync"
)

// SpareKey makes one key ahead of need and hands it to the first caller that asks for one.
// Finding the primes of the principal's RSA-3072 JWT key takes tenths of a second of one core,
// and more on a busy one; made on a new principal's first pass, it held the pass before any
// agent's cluster secret was written, with the API server idle. A spare lives only in
// this process's memory until it is taken, and is never made again: later keys (another
// principal, a requested rotation) are made when asked for.
type SpareKey struct {
	// New makes a key; NewJWTSigningKey when nil.
	New func() ([]byte, error)

	mu       sync.Mutex
	prepared bool
	spare    chan madeKey // nil before Prepare and once taken
}

type madeKey struct {
	pem []byte
	err error
}

func (s *SpareKey) newKey() ([]byte, error) {
	if s == nil || s.New == nil {
		return NewJWTSigningKey()
	}
	return s.New()
}

// Prepare starts making the spare in the background. Only the first call does anything; on a
// nil SpareKey, nothing does.
func (s *SpareKey) Prepare() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared {
		return
	}
	s.prepared = true
	spare := make(chan madeKey, 1)
	s.spare = spare
	go func() {
		key, err := s.newKey()
		spare <- madeKey{pem: key, err: err}
	}()
}

// Take returns the spare, waiting for it while it is being made (it has a head start on a
// key made now); with no spare, or when making it failed, it makes a key. A nil SpareKey
// makes one each time.
func (s *SpareKey) Take(ctx context.Context) ([]byte, error) {
	if s == nil {
		return s.newKey()
	}
	s.mu.Lock()
	spare := s.spare
	s.spare = nil
	s.mu.Unlock()
	if spare == nil {
		return s.newKey()
	}
	select {
	case made := <-spare:
		if made.err != nil {
			return s.newKey()
		}
		return made.pem, nil
	case <-ctx.Done():
		// Put it back for the next caller: it is still being made.
		s.mu.Lock()
		if s.spare == nil {
			s.spare = spare
		}
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}
