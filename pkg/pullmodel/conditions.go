package pullmodel

import (
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConditionDeliveryError is the type of the hub Application condition that says why it is
// not delivered. Argo CD shows condition types ending in "Error" as errors.
const ConditionDeliveryError = "OCMDeliveryError"

// ConditionApplyError is the type of the hub Application condition that says OCM's work agent
// on the cluster could not apply the Application there (forbidden, missing CRD or namespace).
const ConditionApplyError = "OCMApplyError"

// Conditions returns an Application's status.conditions.
func Conditions(app *unstructured.Unstructured) []any {
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	return conds
}

// DeliveryCondition returns the message of the Application's delivery condition, or "".
func DeliveryCondition(app *unstructured.Unstructured) (string, bool) {
	for _, c := range Conditions(app) {
		m, _ := c.(map[string]any)
		if m["type"] == ConditionDeliveryError {
			msg, _ := m["message"].(string)
			return msg, true
		}
	}
	return "", false
}

// WithDeliveryCondition returns the Application's conditions with the delivery condition set
// to message, or removed when message is empty; the others are kept as they are.
func WithDeliveryCondition(app *unstructured.Unstructured, message string, now time.Time) []any {
	out := []any{}
	for _, c := range Conditions(app) {
		if m, _ := c.(map[string]any); m["type"] == ConditionDeliveryError {
			continue
		}
		out = append(out, c)
	}
	if message != "" {
		out = append(out, map[string]any{
			"type":               ConditionDeliveryError,
			"message":            message,
			"lastTransitionTime": now.UTC().Format(time.RFC3339),
		})
	}
	return out
}

// Truncate cuts a message to at most limit bytes at a character boundary and says so: Argo CD's
// errors can quote whole manifests, and what the pull model writes them into is one etcd object.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = " ... (truncated)"
	cut := max(limit-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
