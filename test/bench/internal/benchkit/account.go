package benchkit

import (
	"fmt"
	"time"
)

// PerUnit is d spread over n units of work (0 for none).
func PerUnit(d time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return d / time.Duration(n)
}

// PerMinute is d spread over the minutes of over (0 for none).
func PerMinute(d, over time.Duration) time.Duration {
	if over <= 0 {
		return 0
	}
	return time.Duration(float64(d) / over.Minutes())
}

// Ms formats a duration in milliseconds with two decimals.
func Ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// Ratio is a/b (0 when b is 0).
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// PerEach is n spread over units (0 for none).
func PerEach(n, units int) float64 {
	if units <= 0 {
		return 0
	}
	return float64(n) / float64(units)
}

// Unit is one kind of unit of work a phase did, for Account.
type Unit struct {
	Name  string // "registered cluster", "raw create"
	Count int
}

// Account says what a phase cost per unit of work: the API server's and etcd's CPU, each
// other role's, the writes and the watch events, one line.
func Account(name string, c Cost, u Unit) string {
	s := fmt.Sprintf("%s: %d %ss in %s; per %s: API server and etcd %s (etcd %s)", name, u.Count, u.Name,
		c.Took.Round(10*time.Millisecond), u.Name, Ms(PerUnit(c.Servers(), u.Count)), Ms(PerUnit(c.CPU[Etcd], u.Count)))
	for _, role := range []string{Manager, Bench} {
		if d, ok := c.CPU[role]; ok {
			s += fmt.Sprintf(", %s %s", role, Ms(PerUnit(d, u.Count)))
		}
	}
	return s + fmt.Sprintf(", %.3f writes, %.3f watch events", PerEach(Total(c.Writes()), u.Count), PerEach(Total(c.Events), u.Count))
}
