// Package recorder gives the manager's controllers their Event recorders. The API server
// refuses an Event whose note is over 1024 characters, and the refused Event is lost; notes
// built from a fleet (cluster lists, joined errors) can grow past that, so every recorder here
// shortens its notes to fit.
package recorder

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// MaxNote is the longest note the API server accepts on an Event.
const MaxNote = 1024

// For returns the manager's recorder for reporting controller name, with notes bounded.
func For(mgr manager.Manager, name string) events.EventRecorder {
	return Bounded(mgr.GetEventRecorder(name))
}

// Bounded wraps r so that every note fits in MaxNote.
func Bounded(r events.EventRecorder) events.EventRecorder {
	return bounded{r}
}

type bounded struct{ events.EventRecorder }

// Eventf formats note with args; a note without args is a message already written (an
// error, a condition's message) and is used as it is, so a "%" in it stays a "%".
func (b bounded) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if len(args) > 0 {
		note = fmt.Sprintf(note, args...)
	}
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Shorten(note))
}

// Shorten cuts s to MaxNote bytes, on a character boundary, ending in "..." when cut.
func Shorten(s string) string {
	if len(s) <= MaxNote {
		return s
	}
	return strings.ToValidUTF8(s[:MaxNote-3], "") + "..."
}
