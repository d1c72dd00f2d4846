package e2enodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// hubArgoCDWorkloads are the workloads of Argo CD's install.yaml a hub running the
// ocm-manifestwork plugin needs: the others (argocd-server, Dex, notifications, the
// applicationset-controller) are left out to spare the machine's two cores.
var hubArgoCDWorkloads = map[string]bool{
	"argocd-repo-server": true, "argocd-application-controller": true, "argocd-redis": true,
}

// installHubArgoCD applies the pinned release's install.yaml (from hack/argocd-binaries.sh) to
// namespace as a hub admin with an image mirror does: every image's registry replaced by reg,
// the workloads outside hubArgoCDWorkloads left out. It returns the images it names.
func installHubArgoCD(ctx context.Context, c client.Client, argoDir, namespace, reg string, argoCDCM map[string]string) ([]string, error) {
	fh, err := os.Open(filepath.Join(argoDir, "install.yaml"))
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	images := map[string]bool{}
	dec := utilyaml.NewYAMLOrJSONDecoder(fh, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		switch u.GetKind() {
		case "":
			continue
		case "CustomResourceDefinition":
			continue // installed with the hub
		case "Deployment", "StatefulSet":
			if !hubArgoCDWorkloads[u.GetName()] {
				continue
			}
			for _, field := range []string{"initContainers", "containers"} {
				ctrs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
				for _, ctr := range ctrs {
					m := ctr.(map[string]any)
					m["image"] = spoke.RewriteRegistry(m["image"].(string), reg)
					images[m["image"].(string)] = true
				}
				if ctrs != nil {
					_ = unstructured.SetNestedSlice(u.Object, ctrs, "spec", "template", "spec", field)
				}
			}
		case "ConfigMap":
			if u.GetName() == "argocd-cm" {
				for k, v := range argoCDCM {
					_ = unstructured.SetNestedField(u.Object, v, "data", k)
				}
			}
		}
		if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" {
			u.SetNamespace(namespace)
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	var out []string
	for i := range images {
		out = append(out, i)
	}
	return out, nil
}
