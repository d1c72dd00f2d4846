// Package cmp turns a folder of Kubernetes manifests into OCM ManifestWorks, one set per target
// cluster, so that OCM's work agent applies them and the clusters need no Argo CD at all. It
// runs as an Argo CD Config Management Plugin on the hub: the hub Argo CD syncs the
// ManifestWorks into the clusters' hub namespaces, and OCM delivers their content.
package cmp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"
)

// Size limits. OCM's work webhook refuses a ManifestWork whose manifests total more than
// 500 KiB; works are filled up to MaxWorkBytes (the budget OCM's own addon manager uses for
// its split works), leaving room for the ManifestWork's own fields.
const (
	WebhookLimitBytes   = 500 * 1024
	DefaultMaxWorkBytes = 400 * 1024
)

// Labels and annotations on the generated ManifestWorks.
const (
	// LabelApplication is the generating Argo CD Application's name (cut to a label value).
	LabelApplication = "argocd-agent-addon.open-cluster-management.io/cmp-application"
	// AnnotationApplication is the generating Application's instance name (ARGOCD_APP_NAME).
	AnnotationApplication = "argocd-agent-addon.open-cluster-management.io/cmp-application"
	// AnnotationPart is "<i>/<n>": which of the cluster's works this is.
	AnnotationPart = "argocd-agent-addon.open-cluster-management.io/cmp-part"
)

// Options say what to generate.
type Options struct {
	// Clusters are the managed clusters to deliver to: one set of ManifestWorks each, in the
	// hub namespace named after the cluster.
	Clusters []string
	// Name is the ManifestWorks' base name; works are named "<name>-<i>", i from 0.
	Name string
	// Application is the Argo CD Application's instance name as Argo CD hands it to a plugin
	// (ARGOCD_APP_NAME: its name, or "<namespace>_<name>" outside Argo CD's own namespace, so
	// unique on the hub), recorded on the works. ARGOCD_APP_NAMESPACE is the destination's
	// namespace, not the Application's, and says nothing of who it is.
	Application string
	// Namespace, when set, is given to every object without one whose kind is not known to be
	// cluster-scoped.
	Namespace string
	// MaxWorkBytes is the manifests' budget per ManifestWork; DefaultMaxWorkBytes when 0.
	MaxWorkBytes int
	// Source is how the folder becomes manifests; DetectSource's answer when empty.
	Source SourceType
	// Helm configures a Helm source (Namespace is the release namespace).
	Helm HelmOptions
}

// Generate loads dir (a folder of manifests, a kustomization or a Helm chart) and renders its
// ManifestWorks as a YAML stream.
func Generate(dir string, opts Options) ([]byte, error) {
	typ := opts.Source
	if typ == "" {
		typ = DetectSource(dir)
	}
	objs, err := LoadSource(dir, typ, opts.Namespace, opts.Helm)
	if err != nil {
		return nil, err
	}
	works, err := Render(objs, opts)
	if err != nil {
		return nil, err
	}
	var out []byte
	for i, w := range works {
		b, err := yaml.Marshal(w)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, []byte("---\n")...)
		}
		out = append(out, b...)
	}
	return out, nil
}

// Render packs the objects into ManifestWorks for every cluster. The output depends only on the
// inputs: clusters sorted, objects in file order with CRDs and Namespaces first, each work
// filled in that order up to the budget.
func Render(objs []object, opts Options) ([]*workv1.ManifestWork, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, errors.New("the folder holds no Kubernetes manifests (.yaml, .yml or .json); an empty result would delete what was delivered before")
	}
	budget := opts.MaxWorkBytes
	if budget <= 0 {
		budget = DefaultMaxWorkBytes
	}
	ordered := slices.Clone(objs)
	sort.SliceStable(ordered, func(i, j int) bool { return applyOrder(ordered[i]) < applyOrder(ordered[j]) })

	items := make([][]byte, 0, len(ordered))
	seen := map[string]source{}
	var errs []error
	for _, o := range ordered {
		u := o.obj.DeepCopy()
		if opts.Namespace != "" && u.GetNamespace() == "" && !clusterScoped(u.GroupVersionKind().Group, u.GetKind()) {
			u.SetNamespace(opts.Namespace)
		}
		key := fmt.Sprintf("%s/%s/%s/%s", u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName())
		if first, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: %s %s is also defined in %s", o.src, u.GetKind(), qualified(u.GetNamespace(), u.GetName()), first))
			continue
		}
		seen[key] = o.src
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.src, err)
		}
		if len(raw) > budget {
			errs = append(errs, fmt.Errorf("%s: %s %s is %d KiB, more than one ManifestWork may hold (%d KiB; OCM refuses works over %d KiB); split it or deliver it another way",
				o.src, u.GetKind(), qualified(u.GetNamespace(), u.GetName()), kib(len(raw)), kib(budget), kib(WebhookLimitBytes)))
			continue
		}
		items = append(items, raw)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	parts := pack(items, budget)

	clusters := slices.Clone(opts.Clusters)
	slices.Sort(clusters)
	clusters = slices.Compact(clusters)
	configs := make([][]workv1.ManifestConfigOption, len(parts))
	for i, manifests := range parts {
		configs[i] = readinessConfigs(manifests)
	}
	var works []*workv1.ManifestWork
	for _, c := range clusters {
		for i, manifests := range parts {
			works = append(works, &workv1.ManifestWork{
				TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
				ObjectMeta: metav1.ObjectMeta{
					Name:      fmt.Sprintf("%s-%d", WorkBase(opts), i),
					Namespace: c,
					// Argo CD owns these works (it applies and prunes them), not the manager:
					// they carry no managed-by label of this project, so no controller of the
					// manager ever takes them for its own.
					Labels: map[string]string{LabelApplication: labelValue(opts.Name)},
					Annotations: map[string]string{
						AnnotationApplication: opts.Application,
						AnnotationPart:        fmt.Sprintf("%d/%d", i+1, len(parts)),
					},
				},
				Spec: workv1.ManifestWorkSpec{
					Workload: workv1.ManifestsTemplate{Manifests: manifests},
					// Readiness of the workloads, for the hub Argo CD's health check (health.lua).
					ManifestConfigs: configs[i],
				},
			})
		}
	}
	return works, nil
}

// pack fills parts with the items in order, each part up to budget bytes (an item alone may
// fill one).
func pack(items [][]byte, budget int) [][]workv1.Manifest {
	var parts [][]workv1.Manifest
	var current []workv1.Manifest
	size := 0
	for _, raw := range items {
		if size+len(raw) > budget && len(current) > 0 {
			parts = append(parts, current)
			current, size = nil, 0
		}
		current = append(current, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		size += len(raw)
	}
	return append(parts, current)
}

func (o Options) validate() error {
	var errs []error
	if len(o.Clusters) == 0 {
		errs = append(errs, errors.New("no target cluster: set the plugin parameter CLUSTERS (comma-separated managed cluster names; an ApplicationSet can template one per cluster of a Placement)"))
	}
	for _, c := range o.Clusters {
		if msgs := validation.IsDNS1123Label(c); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("cluster %q is not a managed cluster name: %s", c, strings.Join(msgs, "; ")))
		}
	}
	// Room for "-<index>".
	if msgs := validation.IsDNS1123Subdomain(WorkBase(o) + "-99"); o.Name == "" || len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("work name %q is not usable as a ManifestWork name (lower-case DNS subdomain): %s", o.Name, strings.Join(msgs, "; ")))
	}
	if o.Namespace != "" {
		if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %s", o.Namespace, strings.Join(msgs, "; ")))
		}
	}
	if o.MaxWorkBytes > WebhookLimitBytes {
		errs = append(errs, fmt.Errorf("a work budget of %d KiB exceeds OCM's limit of %d KiB", kib(o.MaxWorkBytes), kib(WebhookLimitBytes)))
	}
	return errors.Join(errs...)
}

// WorkBase is the name the works of one generation share before their index: the base name,
// and, when the works are made for an Application, a digest of its instance name. Whatever base name an Application's plugin settings ask for (ARGOCD_ENV_WORK_NAME), its
// works can then never carry the name of another Application's works, of the pull model's
// ("<name>-<five characters>") or of OCM's addons: an Application can only ever write its own.
func WorkBase(o Options) string {
	if o.Application == "" {
		return o.Name
	}
	// 128 bits: finding another instance name with the same digest is out of reach.
	sum := sha256.Sum256([]byte(o.Application))
	return o.Name + "-" + hex.EncodeToString(sum[:16])
}

// WorkName turns an Application name into a ManifestWork base name: Argo CD Application names
// are DNS subdomains already (an underscore joins namespace and name of one outside Argo CD's
// namespace); longer ones are cut and made unique with a hash.
func WorkName(app string) string {
	// Argo CD names an Application outside its own namespace "<namespace>_<name>".
	n := strings.ReplaceAll(strings.ToLower(app), "_", "-")
	// Room for WorkBase's digest and the index.
	const most = validation.DNS1123SubdomainMaxLength - 40
	if len(n) > most {
		sum := sha256.Sum256([]byte(app))
		n = strings.TrimRight(n[:most-9], "-.") + "-" + hex.EncodeToString(sum[:4])
	}
	return n
}

func labelValue(s string) string {
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	return strings.TrimRight(s, "-_.")
}

// applyOrder puts CRDs, then Namespaces, before everything else.
func applyOrder(o object) int {
	switch o.obj.GetKind() {
	case "CustomResourceDefinition":
		return 0
	case "Namespace":
		return 1
	}
	return 2
}

// clusterScopedKinds are the built-in cluster-scoped kinds, by group.
var clusterScopedKinds = map[string][]string{
	"":                             {"Namespace", "Node", "PersistentVolume"},
	"apiextensions.k8s.io":         {"CustomResourceDefinition"},
	"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
	"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment"},
	"scheduling.k8s.io":            {"PriorityClass"},
	"admissionregistration.k8s.io": {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
	"apiregistration.k8s.io":       {"APIService"},
	"networking.k8s.io":            {"IngressClass"},
	"node.k8s.io":                  {"RuntimeClass"},
	"certificates.k8s.io":          {"CertificateSigningRequest"},
}

func clusterScoped(group, kind string) bool { return slices.Contains(clusterScopedKinds[group], kind) }

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func kib(n int) int { return (n + 1023) / 1024 }
