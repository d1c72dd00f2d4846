package pullmodel

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// CompactApplication is the pull model's cache transform for hub Applications: the object
// without the metadata the pull model never reads (compactMetadata), its keys, short strings
// and small sub-objects (a health, a sync policy, a sync request) shared with the other cached
// Applications. Decoded into maps, each
// Application costs the cache about six times its JSON, most of it in maps and strings that
// repeat from one Application to the next. The object given is never written: client-go may
// hand the transform an object the cache already holds.
func CompactApplication(o any) (any, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o, nil
	}
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if m, isMap := v.(map[string]any); isMap && k == "metadata" {
			out[sharing.String(k)] = compactMetadata(m)
			continue
		}
		out[sharing.String(k)] = sharing.JSON(v)
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// compactMetadata shares what repeats in an object's metadata (labels, annotations, owners,
// finalizers, namespace), keeps what names this one object as it is, so that the sharing
// tables are not filled with strings no other object has, and drops what the pull model never
// reads: the managed fields, the generation (an Application has no status subresource, so it
// moves with every status write) and the creation time. An Application's metadata then has at
// most eight keys until it is deleted: one group of Go's map, half the memory of the two a
// ninth key takes, about 330 bytes per cached Application.
func compactMetadata(m map[string]any) map[string]any {
	kept := 0
	for k := range m {
		if !droppedMetadata(k) {
			kept++
		}
	}
	out := make(map[string]any, kept)
	for k, v := range m {
		switch {
		case droppedMetadata(k):
		case k == "name" || k == "uid" || k == "resourceVersion" || k == "deletionTimestamp":
			out[sharing.String(k)] = v
		default:
			out[sharing.String(k)] = sharing.JSON(v)
		}
	}
	return out
}

// droppedMetadata reports whether the pull model's cache leaves the metadata key k out.
func droppedMetadata(k string) bool {
	return k == "managedFields" || k == "generation" || k == "creationTimestamp"
}

// CompactWork is the pull model's cache transform for its ManifestWorks: the object without
// its managed fields, its metadata shared as the manager's main cache shares it (but for its
// annotations' values), its feedback rules and update strategy (alike in every ManifestWork of
// one kind of Application: some two dozen JSONPaths, about 4 KB) one shared copy, and the
// strings of its status (condition types, reasons and messages, feedback names and short
// values) shared. Everything the controllers read and compare keeps its value. The object given
// is never written.
func CompactWork(o any) (any, error) {
	w, ok := o.(*workv1.ManifestWork)
	if !ok {
		return o, nil
	}
	c := *w
	c.ManagedFields = nil
	// Its annotations' values name its one Application and carry its seal and requests: shared,
	// they would only fill the tables the main cache shares its strings through. Their keys
	// repeat.
	annotations := c.Annotations
	c.Annotations = nil
	sharing.ObjectMeta(&c)
	c.Annotations = sharing.Keys(annotations)
	if len(w.Spec.ManifestConfigs) > 0 {
		c.Spec.ManifestConfigs = make([]workv1.ManifestConfigOption, len(w.Spec.ManifestConfigs))
		for i, mc := range w.Spec.ManifestConfigs {
			mc.ResourceIdentifier.Group = sharing.String(mc.ResourceIdentifier.Group)
			mc.ResourceIdentifier.Resource = sharing.String(mc.ResourceIdentifier.Resource)
			mc.ResourceIdentifier.Namespace = sharing.String(mc.ResourceIdentifier.Namespace)
			mc.FeedbackRules = sharedValue(feedbackRules, mc.FeedbackRules)
			mc.UpdateStrategy = sharedValue(updateStrategies, mc.UpdateStrategy)
			c.Spec.ManifestConfigs[i] = mc
		}
	}
	c.Status.Conditions = compactConditions(w.Status.Conditions)
	if len(w.Status.ResourceStatus.Manifests) > 0 {
		c.Status.ResourceStatus.Manifests = make([]workv1.ManifestCondition, len(w.Status.ResourceStatus.Manifests))
		for i, m := range w.Status.ResourceStatus.Manifests {
			rm := &m.ResourceMeta
			rm.Group, rm.Version, rm.Kind, rm.Resource, rm.Namespace = sharing.String(rm.Group), sharing.String(rm.Version), sharing.String(rm.Kind), sharing.String(rm.Resource), sharing.String(rm.Namespace)
			m.Conditions = compactConditions(m.Conditions)
			m.StatusFeedbacks.Values = compactFeedback(m.StatusFeedbacks.Values)
			c.Status.ResourceStatus.Manifests[i] = m
		}
	}
	return &c, nil
}

// compactConditions is a copy of conds with their strings shared.
func compactConditions(conds []metav1.Condition) []metav1.Condition {
	if len(conds) == 0 {
		return conds
	}
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		c.Type, c.Status, c.Reason, c.Message = sharing.String(c.Type), metav1.ConditionStatus(sharing.String(string(c.Status))), sharing.String(c.Reason), sharing.String(c.Message)
		out[i] = c
	}
	return out
}

// compactFeedback is a copy of values with their names, types and short values shared.
func compactFeedback(values []workv1.FeedbackValue) []workv1.FeedbackValue {
	if len(values) == 0 {
		return values
	}
	out := make([]workv1.FeedbackValue, len(values))
	for i, v := range values {
		v.Name = sharing.String(v.Name)
		v.Value.Type = workv1.ValueType(sharing.String(string(v.Value.Type)))
		v.Value.String = sharing.Pointer(v.Value.String)
		out[i] = v
	}
	return out
}

// feedbackRules and updateStrategies hold one copy of each rule list and update strategy the
// pull model's ManifestWorks carry, by their JSON: a handful of variants, whatever the fleet's
// size.
var (
	feedbackRules    = bounded.NewMap[string, []workv1.FeedbackRule](64)
	updateStrategies = bounded.NewMap[string, *workv1.UpdateStrategy](64)
)

// sharedValue returns the held copy of v, equal to it, by its JSON.
func sharedValue[T any](held *bounded.Map[string, T], v T) T {
	key, err := json.Marshal(v)
	if err != nil {
		return v
	}
	return held.LoadOrStore(string(key), v)
}
