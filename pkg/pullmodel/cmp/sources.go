package cmp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// SourceType says how the source folder becomes manifests.
type SourceType string

// The source types, as Argo CD names them.
const (
	// SourceDirectory reads the folder's manifest files as they are.
	SourceDirectory SourceType = "Directory"
	// SourceKustomize builds the folder's kustomization.
	SourceKustomize SourceType = "Kustomize"
	// SourceHelm renders the folder's chart, as `helm template` does.
	SourceHelm SourceType = "Helm"
)

// kustomizationFiles are the names kustomize reads a kustomization from.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// DetectSource tells the folder's type as Argo CD's repo-server does for its own sources: a
// kustomization makes it Kustomize, else a Chart.yaml makes it Helm, else it is a Directory.
func DetectSource(dir string) SourceType {
	for _, f := range kustomizationFiles {
		if regular(filepath.Join(dir, f)) {
			return SourceKustomize
		}
	}
	if regular(filepath.Join(dir, "Chart.yaml")) {
		return SourceHelm
	}
	return SourceDirectory
}

func regular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// HelmOptions configure a Helm source.
type HelmOptions struct {
	// ReleaseName is the release the chart is rendered as (.Release.Name).
	ReleaseName string
	// ValueFiles are values files, relative to the chart folder and inside it, applied in order.
	ValueFiles []string
	// Set are --set style assignments (a.b=c), applied after the values files.
	Set []string
	// KubeVersion is the cluster version the chart sees (.Capabilities.KubeVersion); Helm's
	// default when empty.
	KubeVersion string
}

// LoadSource reads dir as its type says: the manifest files of a Directory, the output of
// kustomize build for Kustomize, or the chart's rendered templates (CRDs included, hooks left
// out) for Helm.
func LoadSource(dir string, typ SourceType, namespace string, helm HelmOptions) ([]object, error) {
	for _, known := range []SourceType{SourceDirectory, SourceKustomize, SourceHelm} {
		if strings.EqualFold(string(typ), string(known)) {
			typ = known
		}
	}
	switch typ {
	case SourceDirectory, "":
		return Load(dir)
	case SourceKustomize:
		return loadKustomize(dir)
	case SourceHelm:
		return loadHelm(dir, namespace, helm)
	default:
		return nil, fmt.Errorf("unknown source type %q: use %s, %s or %s", typ, SourceDirectory, SourceKustomize, SourceHelm)
	}
}

// loadKustomize builds the kustomization with kustomize's library defaults: files outside the
// folder's tree cannot be loaded and no plugins (exec, Helm charts) run, since the plugin runs
// on the hub with whatever the repository says.
func loadKustomize(dir string) ([]object, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	out, err := res.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	return decodeStream(out, "kustomize build")
}

// loadHelm renders the chart offline, as `helm template --include-crds` does. Dependencies must
// be in the chart's charts/ folder (helm dependency build, committed): nothing is fetched.
// Hooks are left out: a ManifestWork applies its objects together and has no hook phases.
func loadHelm(dir, namespace string, o HelmOptions) ([]object, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the Helm chart: %w", err)
	}
	if reqs := ch.Metadata.Dependencies; len(reqs) > 0 {
		if err := action.CheckDependencies(ch, reqs); err != nil {
			return nil, fmt.Errorf("the chart's dependencies must be in its charts/ folder (helm dependency build, then commit them): %w", err)
		}
	}
	values := map[string]any{}
	for _, f := range o.ValueFiles {
		path, err := inside(dir, f)
		if err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		current := map[string]any{}
		if err := yaml.Unmarshal(raw, &current); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		values = chartutil.CoalesceTables(current, values)
	}
	for _, s := range o.Set {
		if err := strvals.ParseInto(s, values); err != nil {
			return nil, fmt.Errorf("helm parameter %q: %w", s, err)
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.IncludeCRDs = true
	install.Replace = true
	install.DisableHooks = true
	install.ReleaseName = o.ReleaseName
	install.Namespace = namespace
	if o.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(o.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kube version %q: %w", o.KubeVersion, err)
		}
		install.KubeVersion = kv
	}
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, fmt.Errorf("helm template: %w", err)
	}
	return decodeStream([]byte(rel.Manifest), "helm template")
}

// inside resolves a path given relative to dir and refuses one that leaves it: a values file
// is read on the hub's repo-server, where other Applications' sources are.
func inside(dir, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("values file %s: must be relative to the chart folder", rel)
	}
	path := filepath.Join(dir, rel)
	r, err := filepath.Rel(dir, path)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("values file %s: outside the chart folder", rel)
	}
	// A link inside the folder may point out of it.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("values file %s: %w", rel, err)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	if r, err := filepath.Rel(root, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", errors.New("values file " + rel + ": links outside the chart folder")
	}
	return real, nil
}
