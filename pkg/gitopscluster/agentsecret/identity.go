package agentsecret

import (
	"encoding/binary"
	"time"
)

// The compact form stores an Identity in a fixed binary layout rather than JSON: every pass of
// the reconciler reads the identity of each cached secret, and decoding JSON by reflection for
// each of thousands of secrets per pass cost more than the pass's own work. The layout, all
// integers big-endian:
//
//	version (1 byte) | flags (1 byte) | NotBefore | NotAfter | Fingerprint | Issuer | CommonName
//
// where each time is its Unix seconds (8 bytes) and nanoseconds (4 bytes), and each string is
// its length (2 bytes) and its bytes.
const (
	identityVersion = 1

	flagKeyMatches = 1 << 0
	flagClientAuth = 1 << 1

	timeBytes      = 8 + 4
	identityHeader = 2 + 2*timeBytes
)

func encodeIdentity(c Identity) []byte {
	out := make([]byte, 0, identityHeader+3*2+len(c.Fingerprint)+len(c.Issuer)+len(c.CommonName))
	var flags byte
	if c.KeyMatches {
		flags |= flagKeyMatches
	}
	if c.ClientAuth {
		flags |= flagClientAuth
	}
	out = append(out, identityVersion, flags)
	out = appendTime(out, c.NotBefore)
	out = appendTime(out, c.NotAfter)
	for _, s := range []string{c.Fingerprint, c.Issuer, c.CommonName} {
		// A field longer than the length can say is cut: only a certificate that is not ours
		// has such a common name, and fingerprints are 64 characters.
		s = s[:min(len(s), 1<<16-1)]
		out = binary.BigEndian.AppendUint16(out, uint16(len(s)))
		out = append(out, s...)
	}
	return out
}

// appendTime stores t as Unix seconds and nanoseconds; the zero time is stored as its own
// (negative) seconds, so it reads back as the zero time, and the Unix epoch as itself.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func decodeIdentity(b []byte) (Identity, bool) {
	if len(b) < identityHeader || b[0] != identityVersion {
		return Identity{}, false
	}
	c := Identity{
		KeyMatches: b[1]&flagKeyMatches != 0,
		ClientAuth: b[1]&flagClientAuth != 0,
		NotBefore:  readTime(b[2:]),
		NotAfter:   readTime(b[2+timeBytes:]),
	}
	rest := b[identityHeader:]
	for _, field := range []*string{&c.Fingerprint, &c.Issuer, &c.CommonName} {
		if len(rest) < 2 {
			return Identity{}, false
		}
		n := int(binary.BigEndian.Uint16(rest))
		if len(rest) < 2+n {
			return Identity{}, false
		}
		*field = string(rest[2 : 2+n])
		rest = rest[2+n:]
	}
	if len(rest) != 0 {
		return Identity{}, false
	}
	return c, true
}

func readTime(b []byte) time.Time {
	return time.Unix(int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint32(b[8:]))).UTC()
}
