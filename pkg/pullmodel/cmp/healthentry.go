package cmp

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// HealthCheckFieldManager owns, through server-side apply, exactly the health check entry in
// argocd-cm; every other key stays its owner's (Argo CD's install, Helm, a person).
const HealthCheckFieldManager = "argocd-agent-addon-cmp-health"

// HealthCheckEntry says where the ManifestWork health check goes: Argo CD's settings
// ConfigMap, which Argo CD reads live.
type HealthCheckEntry struct {
	Namespace, ConfigMap string
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// applyConfig is the applied configuration: with install false it names no key, which makes
// the API server remove the one this field manager set, unless another manager set it too.
func (h HealthCheckEntry) applyConfig(install bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": h.ConfigMap, "namespace": h.Namespace},
	}}
	if install {
		u.Object["data"] = map[string]any{HealthCheckKey: HealthCheck()}
	}
	return u
}

// Apply writes the health check entry (install) into the ConfigMap or takes back what an
// earlier Apply wrote (remove). It never creates the ConfigMap: Argo CD's install owns it, and
// a missing one is an error that says so. The entry is forced, so an older copy of it (added by
// hand from `cmp health-check`) is replaced.
func (h HealthCheckEntry) Apply(ctx context.Context, c dynamic.Interface, install bool) error {
	res := c.Resource(configMaps).Namespace(h.Namespace)
	if _, err := res.Get(ctx, h.ConfigMap, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			if !install {
				return nil
			}
			return fmt.Errorf("the ConfigMap %s/%s does not exist; install Argo CD first or name its settings ConfigMap", h.Namespace, h.ConfigMap)
		}
		return err
	}
	if _, err := res.Apply(ctx, h.ConfigMap, h.applyConfig(install), metav1.ApplyOptions{FieldManager: HealthCheckFieldManager, Force: true}); err != nil {
		return fmt.Errorf("applying the ManifestWork health check to %s/%s: %w", h.Namespace, h.ConfigMap, err)
	}
	return nil
}
