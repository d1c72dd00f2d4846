package recorder

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
)

type notes struct{ got []string }

func (n *notes) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	n.got = append(n.got, fmt.Sprintf(note, args...))
}

// TestBoundedNotesFit: a note of any length reaches the API server within its 1024-character
// limit, cut on a character boundary; a short one, and one with a literal % (given as an
// argument, or as a message with no arguments), unchanged.
func TestBoundedNotesFit(t *testing.T) {
	sink := &notes{}
	r := Bounded(sink)
	long := strings.Repeat("cluster-é, ", 300)
	r.Eventf(nil, nil, "Warning", "BlocklistFull", "RevokeAgents", "could not block %s", long)
	r.Eventf(nil, nil, "Normal", "AgentsRegistered", "RegisterAgents", "registered %d agent(s)", 3)
	r.Eventf(nil, nil, "Normal", "Note", "Act", "%s", "100% done")
	r.Eventf(nil, nil, "Warning", "BlocklistNearFull", "RevokeAgents", "the blocklist holds 80% of the bytes it may use")
	if len(sink.got) != 4 {
		t.Fatalf("%d notes, want 4", len(sink.got))
	}
	if n := len(sink.got[0]); n > MaxNote || !utf8.ValidString(sink.got[0]) || !strings.HasSuffix(sink.got[0], "...") || !strings.HasPrefix(sink.got[0], "could not block cluster-é") {
		t.Errorf("long note: %d bytes, valid UTF-8 %v: %.60q...", n, utf8.ValidString(sink.got[0]), sink.got[0])
	}
	if sink.got[1] != "registered 3 agent(s)" || sink.got[2] != "100% done" || sink.got[3] != "the blocklist holds 80% of the bytes it may use" {
		t.Errorf("short notes changed: %q", sink.got[1:])
	}
}
