package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
)

// ChartRelease is the release name the tests install the chart as.
const ChartRelease = "argocd-agent-addon"

// needsAPod are the kinds of the chart that only matter with a kubelet and a network: a test
// runs the manager as a process instead, with the chart's identity. CRDs are installed with the
// API server.
var needsAPod = map[string]bool{
	"Deployment": true, "Service": true, "PodDisruptionBudget": true, "ServiceMonitor": true,
	"CustomResourceDefinition": true,
}

// ChartInstall is what a test needs to run the manager as the chart's Deployment would.
type ChartInstall struct {
	// Namespace is the release namespace; ServiceAccount the manager's ServiceAccount there.
	Namespace, ServiceAccount string
	// ManagerArgs are the manager container's arguments.
	ManagerArgs []string
}

// InstallChart renders the project's chart with values into namespace (as `helm install -n
// namespace`) and creates what it renders, except what needs a pod or a network and the CRDs:
// the ServiceAccount, every ClusterRole, Role and binding, the ConfigMaps and the admission
// policies. The namespaces the objects go into must exist. The manager is then run as a process
// with ManagerArgs, authenticated as the ServiceAccount.
func InstallChart(ctx context.Context, c client.Client, namespace string, values map[string]any) (*ChartInstall, error) {
	manifest, _, err := chartrender.Render(filepath.Join(RepoRoot(), "charts", "argocd-agent-addon"), namespace, ChartRelease, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	in := &ChartInstall{Namespace: namespace}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading the rendered chart: %w", err)
		}
		switch {
		case len(u.Object) == 0:
			continue
		case u.GetKind() == "Deployment" && u.GetName() == ChartRelease:
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			for _, ctr := range containers {
				if ctr, _ := ctr.(map[string]any); ctr["name"] == "manager" {
					args, _, _ := unstructured.NestedStringSlice(ctr, "args")
					in.ManagerArgs = args
				}
			}
		case u.GetKind() == "ServiceAccount":
			in.ServiceAccount = u.GetName()
		}
		if needsAPod[u.GetKind()] {
			continue
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %s %s/%s from the chart: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	if in.ServiceAccount == "" || len(in.ManagerArgs) == 0 {
		return nil, errors.New("the chart rendered no ServiceAccount or no manager container")
	}
	return in, nil
}

// Args returns the manager's arguments with overrides: a flag given there (--name=value)
// replaces the chart's flag of that name, the others are appended.
func (in *ChartInstall) Args(overrides ...string) []string {
	name := func(arg string) string { n, _, _ := strings.Cut(arg, "="); return n }
	out := make([]string, 0, len(in.ManagerArgs)+len(overrides))
	for _, a := range in.ManagerArgs {
		if !slices.ContainsFunc(overrides, func(o string) bool { return name(o) == name(a) }) {
			out = append(out, a)
		}
	}
	return append(out, overrides...)
}
