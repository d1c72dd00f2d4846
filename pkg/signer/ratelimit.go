package signer

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Per-requester pace of certificate requests. OCM's registration agent asks about once a day
// per agent; the budget lets a cluster through bursts (a lift, a forced renewal, a fleet
// re-created) and bounds what one cluster's identity can make the signer do: every request is
// a read of the hub's state and a write of a verdict.
const (
	// DefaultRequestBurst is how many requests one requester may make at once.
	DefaultRequestBurst = 60
	// DefaultRequestInterval is how often one more is allowed after that.
	DefaultRequestInterval = time.Minute
)

// requesterLimits paces requests per requesting user (spec.username, set by the API server, so
// a request cannot spend another cluster's budget by naming it in a label).
type requesterLimits struct {
	mu       sync.Mutex
	burst    int
	interval time.Duration
	byUser   map[string]*rate.Limiter
}

// wait returns how long user's request must wait before it is looked at (0: now).
func (l *requesterLimits) wait(user string, now time.Time) time.Duration {
	if l.burst <= 0 || l.interval <= 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byUser == nil {
		l.byUser = map[string]*rate.Limiter{}
	}
	lim, ok := l.byUser[user]
	if !ok {
		// Forget requesters that are back to a full budget before the map grows past a
		// fleet's size.
		if len(l.byUser) >= 20000 {
			for u, other := range l.byUser {
				if other.TokensAt(now) >= float64(l.burst) {
					delete(l.byUser, u)
				}
			}
		}
		lim = rate.NewLimiter(rate.Every(l.interval), l.burst)
		l.byUser[user] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}
