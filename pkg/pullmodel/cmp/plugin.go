package cmp

import (
	_ "embed"
	"fmt"
	"os"
	"strings"
)

// PluginName and PluginVersion name the Config Management Plugin; an Application selects it
// with spec.source.plugin.name: <PluginName>-<PluginVersion>.
const (
	PluginName    = "ocm-manifestwork"
	PluginVersion = "v1"
)

// PluginConfig is the plugin.yaml of the repo-server sidecar: Argo CD's cmp-server runs the
// generate command in the Application's source folder. binary is this project's executable in
// the sidecar image.
func PluginConfig(binary string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: %s
spec:
  version: %s
  generate:
    command: [%q, cmp, generate]
`, PluginName, PluginVersion, binary)
}

// OptionsFromEnv reads what Argo CD hands a plugin: the Application's instance name
// (ARGOCD_APP_NAME), the destination's Kubernetes version (KUBE_VERSION), and the plugin
// environment of the Application's source (spec.source.plugin.env, given to the plugin as
// ARGOCD_ENV_<NAME>): CLUSTERS, WORK_NAME, NAMESPACE, SOURCE_TYPE, HELM_RELEASE_NAME,
// HELM_VALUES (comma-separated files), HELM_SET (a=b,c=d) and HELM_KUBE_VERSION.
func OptionsFromEnv(getenv func(string) string) Options {
	if getenv == nil {
		getenv = os.Getenv
	}
	app := getenv("ARGOCD_APP_NAME")
	name := getenv("ARGOCD_ENV_WORK_NAME")
	if name == "" && app != "" {
		name = WorkName(app)
	}
	helm := HelmOptions{
		ReleaseName: getenv("ARGOCD_ENV_HELM_RELEASE_NAME"),
		ValueFiles:  SplitClusters(getenv("ARGOCD_ENV_HELM_VALUES")),
		KubeVersion: getenv("ARGOCD_ENV_HELM_KUBE_VERSION"),
	}
	if helm.ReleaseName == "" {
		// The Application's own name: an instance name outside Argo CD's namespace is
		// "<namespace>_<name>", and an underscore is no release name.
		_, helm.ReleaseName, _ = strings.Cut(app, "_")
		if helm.ReleaseName == "" {
			helm.ReleaseName = app
		}
	}
	if set := getenv("ARGOCD_ENV_HELM_SET"); set != "" {
		helm.Set = []string{set}
	}
	if helm.KubeVersion == "" {
		helm.KubeVersion = getenv("KUBE_VERSION")
	}
	return Options{
		Clusters:    SplitClusters(getenv("ARGOCD_ENV_CLUSTERS")),
		Name:        name,
		Application: app,
		Namespace:   getenv("ARGOCD_ENV_NAMESPACE"),
		Source:      SourceType(getenv("ARGOCD_ENV_SOURCE_TYPE")),
		Helm:        helm,
	}
}

// SplitClusters splits a comma- or space-separated list (cluster names, values files).
func SplitClusters(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}

// HealthCheckKey is the argocd-cm key under which Argo CD reads a custom health check for
// ManifestWorks (resource.customizations.health.<group>_<kind>).
const HealthCheckKey = "resource.customizations.health.work.open-cluster-management.io_ManifestWork"

//go:embed health.lua
var healthCheck string

// HealthCheck is the Lua health check for ManifestWorks: Argo CD has none built in, so without
// it a plugin Application is Healthy whatever the clusters report. It reads the conditions OCM's
// work agent writes, the workloads' readiness rules included (see health.lua and readiness.go).
func HealthCheck() string { return healthCheck }
