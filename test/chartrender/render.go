// Package chartrender renders the project's Helm chart offline with Helm's own SDK, for
// hack/render-chart (manifests/install.yaml) and for tests that check what a real install runs.
package chartrender

import (
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericclioptions"
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

// Install installs the chart as `helm install --namespace namespace --create-namespace --wait`
// does, with Helm's SDK against the cluster of kubeconfig: the release is stored in the
// namespace as Helm stores it, and the call returns once the release's workloads are ready.
func Install(kubeconfig, chartDir, namespace, release string, values map[string]any, timeout time.Duration, logf func(string, ...any)) (*release.Release, error) {
	ch, cfg, err := load(kubeconfig, chartDir, namespace, logf)
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(cfg)
	install.ReleaseName = release
	install.Namespace = namespace
	install.CreateNamespace = true
	install.Wait = true
	install.Timeout = timeout
	return install.Run(ch, values)
}

// Upgrade upgrades the release as `helm upgrade --reuse-values --wait` does, with values set over
// the release's: its hooks run (post-upgrade ones included) and the call returns once the
// release's workloads are ready.
func Upgrade(kubeconfig, chartDir, namespace, release string, values map[string]any, timeout time.Duration, logf func(string, ...any)) (*release.Release, error) {
	ch, cfg, err := load(kubeconfig, chartDir, namespace, logf)
	if err != nil {
		return nil, err
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = namespace
	upgrade.ReuseValues = true
	upgrade.Wait = true
	upgrade.Timeout = timeout
	return upgrade.Run(release, ch, values)
}

// load reads the chart and makes Helm's configuration for the cluster of kubeconfig, with
// releases stored as Secrets in namespace.
func load(kubeconfig, chartDir, namespace string, logf func(string, ...any)) (*chart.Chart, *action.Configuration, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := Config(kubeconfig, namespace, logf)
	if err != nil {
		return nil, nil, err
	}
	return ch, cfg, nil
}

// Config is Helm's configuration for the cluster of kubeconfig, as the helm command makes it
// with --kubeconfig and --namespace: releases are stored as Secrets in namespace.
func Config(kubeconfig, namespace string, logf func(string, ...any)) (*action.Configuration, error) {
	getter := genericclioptions.NewConfigFlags(false)
	getter.KubeConfig = &kubeconfig
	getter.Namespace = &namespace
	cfg := &action.Configuration{}
	if err := cfg.Init(getter, namespace, "secret", logf); err != nil {
		return nil, err
	}
	return cfg, nil
}
