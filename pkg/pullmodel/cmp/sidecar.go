package cmp

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// SidecarFieldManager owns, through server-side apply, exactly the container and volumes the
// sidecar adds to the repo-server Deployment; everything else there stays its owner's.
const SidecarFieldManager = "argocd-agent-addon-cmp-sidecar"

// SidecarContainerName is the sidecar's container in the repo-server pod.
const SidecarContainerName = "ocm-manifestwork"

// Sidecar says where the plugin sidecar goes and what it runs.
type Sidecar struct {
	// Namespace and Deployment name Argo CD's repo-server.
	Namespace, Deployment string
	// Image is this project's image; Argo CD's argocd-cmp-server comes from the repo-server's
	// shared var-files volume.
	Image string
	// ConfigMap holds plugin.yaml.
	ConfigMap string
}

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// sidecarApply is the applied configuration: with install false it names no container or
// volume, which makes the API server remove the ones this field manager added, and nothing else.
func (s Sidecar) sidecarApply(install bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": s.Deployment, "namespace": s.Namespace},
	}}
	if !install {
		return u
	}
	mount := func(name, path, subPath string) map[string]any {
		m := map[string]any{"name": name, "mountPath": path}
		if subPath != "" {
			m["subPath"] = subPath
		}
		return m
	}
	pluginVolume := SidecarContainerName + "-plugin"
	u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{
			"name":    SidecarContainerName,
			"image":   s.Image,
			"command": []any{"/var/run/argocd/argocd-cmp-server"},
			"securityContext": map[string]any{
				"runAsNonRoot": true, "runAsUser": int64(999), "allowPrivilegeEscalation": false,
				"capabilities":   map[string]any{"drop": []any{"ALL"}},
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			},
			"volumeMounts": []any{
				mount("var-files", "/var/run/argocd", ""),
				mount("plugins", "/home/argocd/cmp-server/plugins", ""),
				mount(pluginVolume, "/home/argocd/cmp-server/config/plugin.yaml", "plugin.yaml"),
				mount("cmp-tmp", "/tmp", ""),
			},
		}},
		"volumes": []any{
			map[string]any{"name": pluginVolume, "configMap": map[string]any{"name": s.ConfigMap}},
			map[string]any{"name": "cmp-tmp", "emptyDir": map[string]any{}},
		},
	}}}
	return u
}

// Apply adds the sidecar to the repo-server Deployment (install) or takes back what an earlier
// Apply added (remove). It never creates the Deployment: a missing one is an error that says so.
// Applying the same configuration again changes nothing, so the pod is rolled only when the
// sidecar changes.
func (s Sidecar) Apply(ctx context.Context, c dynamic.Interface, install bool) error {
	if install && (s.Image == "" || s.ConfigMap == "") {
		return fmt.Errorf("the sidecar needs an image and the plugin.yaml ConfigMap")
	}
	return applyToOwned(ctx, c.Resource(deployments).Namespace(s.Namespace), s.Deployment, SidecarFieldManager, install,
		func() *unstructured.Unstructured { return s.sidecarApply(install) },
		fmt.Sprintf("the repo-server Deployment %s/%s does not exist; install Argo CD first or name its repo-server", s.Namespace, s.Deployment),
		"applying the plugin sidecar to "+s.Namespace+"/"+s.Deployment)
}
