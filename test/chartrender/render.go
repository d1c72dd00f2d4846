// Package chartrender renders the project's Helm chart offline with Helm's own SDK, for
// hack/render-chart (manifests/install.yaml) and for tests that check what a real install runs.
package chartrender

import (
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// Render returns the chart's manifests (CRDs included) for the given values, as
// `helm template` would, against Kubernetes 1.36.
func Render(chartDir, namespace, release string, values map[string]any) (string, *chart.Chart, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.IncludeCRDs = true
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
	rel, err := install.Run(ch, values)
	if err != nil {
		return "", nil, err
	}
	return rel.Manifest, ch, nil
}
