package revocation

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// TestSecondLook: a key is put back only once it has been missing from the blocklist for
// blocklistSecondLook, however often the keeper looks in between (a revocation's record
// shards each wake it before its blocklist write), so a revocation on its way is not
// "restored" with a Warning; a key that came back meanwhile is forgotten; namespaces do not mix.
func TestSecondLook(t *testing.T) {
	k := &BlocklistKeeper{}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		ns        string
		found     []string
		now       time.Time
		confirmed []string
		lookAgain time.Duration
	}{
		{"p1", []string{"a", "b"}, at(0), nil, blocklistSecondLook},                                               // first seen: look again
		{"p1", []string{"a", "b"}, at(50 * time.Millisecond), nil, blocklistSecondLook - 50*time.Millisecond},     // woken at once: too soon
		{"p2", []string{"a"}, at(time.Second), nil, blocklistSecondLook},                                          // another principal's own memory
		{"p1", []string{"b", "c"}, at(blocklistSecondLook), []string{"b"}, blocklistSecondLook},                   // b missing long enough; a came back; c is new
		{"p1", []string{"a", "c"}, at(blocklistSecondLook + time.Second), nil, blocklistSecondLook - time.Second}, // a missing again: counted afresh
		{"p1", []string{"c"}, at(2 * blocklistSecondLook), []string{"c"}, 0},
		{"p1", []string{"c"}, at(2*blocklistSecondLook + time.Millisecond), []string{"c"}, 0}, // not put back yet: at once
		{"p1", nil, at(3 * blocklistSecondLook), nil, 0},
		{"p2", []string{"a"}, at(time.Second + blocklistSecondLook), []string{"a"}, 0},
	}
	for i, s := range steps {
		confirmed, lookAgain := k.secondLook(s.ns, s.found, s.now)
		slices.Sort(confirmed)
		if !slices.Equal(confirmed, s.confirmed) || lookAgain != s.lookAgain {
			t.Errorf("step %d (%s %v): confirmed %v, look again in %s; want %v, %s", i, s.ns, s.found, confirmed, lookAgain, s.confirmed, s.lookAgain)
		}
	}
}

// TestOnlyForWantOfRoom: a deletion goes on past a revocation error only when every part of it
// is the blocklist's want of room; one batch's other failure keeps it for a retry.
func TestOnlyForWantOfRoom(t *testing.T) {
	full := fmt.Errorf("%s: %w", blockFailed, &ledger.BlocklistFullError{Clusters: []string{"a"}})
	other := errors.New("deleting the certificate ledger of cluster b: the server is currently unable to handle the request")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"room only", full, true},
		{"room, joined", errors.Join(full), true},
		{"room in two batches", errors.Join(errors.Join(), full, full), true},
		{"room and another failure", errors.Join(errors.Join(other), full), false},
		{"another failure only", other, false},
	}
	for _, c := range cases {
		if got := onlyForWantOfRoom(c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestListedKeysGoBackAtOnce: a recorded key that some version of the blocklist held is not a
// revocation on its way: missing, it is put back at once (a person's write dropped it), while
// one never seen listed still waits for the second look. Keys no record holds are forgotten.
func TestListedKeysGoBackAtOnce(t *testing.T) {
	k := &BlocklistKeeper{}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	fa, fb, person := strings.Repeat("A", 64), strings.Repeat("B", 64), strings.Repeat("C", 64)
	shards := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: ledger.ShardName(fa)}, Data: map[string]string{fa: "2026-11-27T12:00:00Z revoked c1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: ledger.ShardName(fb)}, Data: map[string]string{fb: "2026-11-27T12:00:00Z revoked c2"}},
	}
	k.sawListed("p1", map[string]string{fa: "", person: ""})
	k.keepListed("p1", shards)
	if k.listed["p1"].Has(person) || !k.listed["p1"].Has(fa) {
		t.Fatalf("listed %v: want the recorded key only", sets.List(k.listed["p1"]))
	}
	confirmed, lookAgain := k.secondLook("p1", []string{fa, fb}, t0)
	if !slices.Equal(confirmed, []string{fa}) || lookAgain != blocklistSecondLook {
		t.Errorf("confirmed %v, look again in %s; want the listed key at once and a second look for the other", confirmed, lookAgain)
	}
	// Another principal's memory is its own.
	if confirmed, _ := k.secondLook("p2", []string{fa}, t0); len(confirmed) != 0 {
		t.Errorf("p2 put back %v on p1's memory", confirmed)
	}
	// Pruned from the record (expired): forgotten.
	k.keepListed("p1", shards[1:])
	if k.listed["p1"].Has(fa) {
		t.Error("a key no record holds any more is still remembered")
	}
}

// TestReportMalformed: keys argocd-agent cannot match are reported once while they stay, with
// the key that would block the certificate when there is one; one removed and added again is
// reported again.
func TestReportMalformed(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	k := &BlocklistKeeper{Hub: config.Hub{Recorder: rec}}
	good := strings.Repeat("AB", 32)
	lower := strings.ToLower(strings.Repeat("CD", 32))
	cm := func(keys ...string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "p", Name: ledger.BlocklistName}, Data: map[string]string{}}
		for _, key := range keys {
			c.Data[key] = ""
		}
		return c
	}
	next := func() string {
		select {
		case e := <-rec.Events:
			return e
		default:
			return ""
		}
	}
	k.reportMalformed("p", cm(good, lower, "sha1-1234"))
	e := next()
	if !strings.Contains(e, "BlocklistKeyMalformed") || !strings.Contains(e, lower) || !strings.Contains(e, strings.ToUpper(lower)) || !strings.Contains(e, "sha1-1234") || strings.Contains(e, good) {
		t.Errorf("event %q", e)
	}
	k.reportMalformed("p", cm(good, lower, "sha1-1234"))
	k.reportMalformed("p", cm(good, "sha1-1234"))
	if e := next(); e != "" {
		t.Errorf("reported again: %q", e)
	}
	k.reportMalformed("p", cm(good, lower, "sha1-1234"))
	if e := next(); !strings.Contains(e, lower) || strings.Contains(e, "sha1-1234") {
		t.Errorf("a key added again: %q", e)
	}
	k.reportMalformed("p", cm(good))
	if e := next(); e != "" {
		t.Errorf("a well-formed blocklist reported: %q", e)
	}
}
