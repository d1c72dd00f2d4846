package cmp

import (
	"context"
	"errors"
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
	return applyToOwned(ctx, c.Resource(configMaps).Namespace(h.Namespace), h.ConfigMap, HealthCheckFieldManager, install,
		func() *unstructured.Unstructured { return h.applyConfig(install) },
		fmt.Sprintf("the ConfigMap %s/%s does not exist; install Argo CD first or name its settings ConfigMap", h.Namespace, h.ConfigMap),
		"applying the ManifestWork health check to "+h.Namespace+"/"+h.ConfigMap)
}

// applyToOwned server-side applies, under fieldManager and forced, what build returns to the
// object name, which another install owns: it never creates it. A missing object is nothing to
// do on removal and the error missing on install.
func applyToOwned(ctx context.Context, res dynamic.ResourceInterface, name, fieldManager string, install bool,
	build func() *unstructured.Unstructured, missing, doing string) error {
	if _, err := res.Get(ctx, name, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			if !install {
				return nil
			}
			return errors.New(missing)
		}
		return err
	}
	if _, err := res.Apply(ctx, name, build(), metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("%s: %w", doing, err)
	}
	return nil
}
