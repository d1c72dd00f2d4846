// Package resourcelist carries the objects a spoke Application deploys from the managed cluster
// to the hub. OCM's work agent feeds back scalar values only (a list needs an alpha gate and
// fits in 1,024 bytes), so the cluster's resource reporter writes the list, encoded as one
// string, into an annotation of the Application, and the ManifestWork feeds that annotation
// back like any other field.
//
// The list names objects only (group, version, kind, namespace, name): their sync and health
// change often and are already summed up in the Application's own status, while the set of
// objects changes only when the Application does, so an idle fleet writes nothing.
package resourcelist

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MaxBytes bounds an encoded list: far below the 256 KiB Kubernetes allows for all of an
// object's annotations together, and small enough that a ManifestWork's status stays small.
// A longer list keeps its first objects (in Argo CD's order) and says how many there are.
const MaxBytes = 16 * 1024

// maxFieldBytes bounds each part of a decoded entry (a DNS subdomain's 253 bytes is the
// longest a Kubernetes name or group may be).
const maxFieldBytes = 253

// Resource names one object an Application deploys.
type Resource struct {
	Group     string
	Version   string
	Kind      string
	Namespace string
	Name      string
}

// APIVersion is the object's apiVersion ("v1" for the core group).
func (r Resource) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// encoded is the annotation's JSON: the number of objects the Application deploys and as many
// of them as fit, each [group, version, kind, namespace, name].
type encoded struct {
	Total int         `json:"total"`
	Items [][5]string `json:"items"`
}

// FromApplication reads the objects of a spoke Application's status.resources.
func FromApplication(app *unstructured.Unstructured) []Resource {
	items, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	out := make([]Resource, 0, len(items))
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		r := Resource{Group: str("group"), Version: str("version"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}
		if r.Kind == "" || r.Name == "" {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Encode returns the annotation value for resources: as many as fit MaxBytes, in their order,
// and how many there are. No resources encode as "" (no annotation).
func Encode(resources []Resource) string {
	if len(resources) == 0 {
		return ""
	}
	e := encoded{Total: len(resources), Items: make([][5]string, 0, len(resources))}
	// The envelope {"total":N,"items":[]} plus one comma per item.
	size := len(fmt.Sprintf(`{"total":%d,"items":[]}`, len(resources)))
	for _, r := range resources {
		item := [5]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name}
		raw, err := json.Marshal(item)
		if err != nil {
			continue
		}
		if size+len(raw)+1 > MaxBytes {
			break
		}
		size += len(raw) + 1
		e.Items = append(e.Items, item)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return ""
	}
	return string(raw)
}

// Decode reads an annotation value, as fed back from a managed cluster: it is the cluster's
// word, so anything malformed or oversized is refused rather than shown.
func Decode(s string) (resources []Resource, total int, err error) {
	if s == "" {
		return nil, 0, nil
	}
	if len(s) > MaxBytes {
		return nil, 0, fmt.Errorf("resource list of %d bytes, more than %d", len(s), MaxBytes)
	}
	var e encoded
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, 0, fmt.Errorf("resource list: %w", err)
	}
	if e.Total < len(e.Items) {
		return nil, 0, fmt.Errorf("resource list of %d items says it has %d", len(e.Items), e.Total)
	}
	out := make([]Resource, 0, len(e.Items))
	for _, it := range e.Items {
		if slices.ContainsFunc(it[:], func(f string) bool { return len(f) > maxFieldBytes }) {
			return nil, 0, fmt.Errorf("resource list: a field longer than %d bytes", maxFieldBytes)
		}
		r := Resource{Group: it[0], Version: it[1], Kind: it[2], Namespace: it[3], Name: it[4]}
		if r.Kind == "" || r.Name == "" || r.Version == "" {
			return nil, 0, fmt.Errorf("resource list: an item without kind, name or version")
		}
		out = append(out, r)
	}
	return out, e.Total, nil
}
