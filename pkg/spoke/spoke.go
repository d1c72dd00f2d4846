// Package spoke builds the AddOnTemplate of the Argo CD components that argocd-agent's agent drives
// on every managed cluster: the Argo CD CRDs, application-controller, repo-server and redis, and in
// autonomous mode the applicationset-controller, with their RBAC and configuration.
//
// The objects are Argo CD's own core install of the release the agent is paired with, one
// directory per paired release (version.Pairs), generated into upstream/<release>/ by
// hack/spoke-manifests and embedded here. The
// builder changes only what a template addon must: the namespace (OCM moves it to the agent's),
// the names of cluster-scoped RBAC (so that they cannot collide with an Argo CD already installed
// on the cluster), the images (template variables, so that a registry mirror applies), image pull
// secrets, and an orphaning annotation on the CRDs.
package spoke

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

//go:embed upstream/*/*.json upstream/*/SOURCE
var upstreamFS embed.FS

// Source names the module version and file the default pair's objects come from.
func Source() string { return SourceOf(version.ArgoCDVersion) }

// SourceOf names the module version and file the objects of an Argo CD release come from, ""
// when the binary does not carry that release.
func SourceOf(argoCDVersion string) string {
	raw, err := upstreamFS.ReadFile(path.Join("upstream", argoCDVersion, "SOURCE"))
	if err != nil || !validRelease(argoCDVersion) {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// ArgoCDVersions are the Argo CD releases whose components the binary carries.
func ArgoCDVersions() []string {
	entries, _ := fs.ReadDir(upstreamFS, "upstream")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// validRelease keeps a release name from being a path (it is joined into one).
func validRelease(argoCDVersion string) bool {
	return argoCDVersion != "" && !strings.ContainsAny(argoCDVersion, "/\\") && argoCDVersion != "." && argoCDVersion != ".."
}

// ImagesFor reads the images of the Argo CD release paired with the agent image's release (the
// default pair's for an image of no supported release), the components that go beside it.
func ImagesFor(agentImage string) (Images, error) {
	pair, _ := version.ComponentsPair(agentImage)
	return UpstreamImagesOf(pair.ArgoCD)
}

// releaseOf is the Argo CD release an Input installs.
func releaseOf(in Input) (string, error) {
	if in.ArgoCDVersion == "" {
		pair, _ := version.ComponentsPair(in.AgentImage)
		return pair.ArgoCD, nil
	}
	return release(in.ArgoCDVersion)
}

// release is the Argo CD release asked for: the default pair's when it names none.
func release(argoCDVersion string) (string, error) {
	if argoCDVersion == "" {
		return version.ArgoCDVersion, nil
	}
	if SourceOf(argoCDVersion) == "" {
		return "", fmt.Errorf("the binary carries no components of Argo CD %s (it carries %s)", argoCDVersion, strings.Join(ArgoCDVersions(), ", "))
	}
	return argoCDVersion, nil
}

// Images the upstream manifests name, found in them: the Argo CD image every Argo CD container
// runs, and the redis image.
type Images struct {
	ArgoCD, Redis string
}

// Input is what the components template depends on.
type Input struct {
	// TemplateName is the AddOnTemplate's name; AddonName the components addon it belongs to.
	TemplateName, AddonName string
	// ArgoCDVersion is the Argo CD release to install, one of ArgoCDVersions. Empty: the pair
	// of AgentImage's release (version.ComponentsPair), the default pair's when that is empty
	// or no supported release.
	ArgoCDVersion string
	// AgentImage is the argocd-agent image the components run beside.
	AgentImage string
	// Mode is "managed" or "autonomous"; autonomous adds the ApplicationSet CRD and controller.
	Mode string
	// ImagePullSecrets are added to every pod; the Secrets must exist in the agent namespace.
	ImagePullSecrets []string
	// AssignedUserIDs drops every fixed UID, GID and fsGroup of the pods (redis runs as 999 in
	// Argo CD's install), so that the platform assigns them (OpenShift's restricted-v2).
	AssignedUserIDs bool
}

// LabelInstalledBy marks every object the components template creates, so that a person (and a
// test) can tell the addon's objects from an Argo CD installed by other means.
const LabelInstalledBy = "argocd-agent-addon.open-cluster-management.io/installed-by"

// Component names, as the app.kubernetes.io/name label of Argo CD's manifests has them.
const (
	appSetControllerName = "argocd-applicationset-controller"
	appSetCRDName        = "applicationsets.argoproj.io"
)

// clusterScoped are the kinds of the core install that have no namespace.
var clusterScoped = map[string]bool{"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true}

// Objects returns the default pair's upstream objects for a mode (see ObjectsOf).
func Objects(mode string) ([]*unstructured.Unstructured, error) {
	return ObjectsOf(version.ArgoCDVersion, mode)
}

// ObjectsOf returns the upstream objects of an Argo CD release for a mode, in a fixed order:
// CRDs first, then RBAC, configuration and workloads. Each call decodes fresh copies.
func ObjectsOf(argoCDVersion, mode string) ([]*unstructured.Unstructured, error) {
	if mode != addon.ModeManaged && mode != addon.ModeAutonomous {
		return nil, fmt.Errorf("agent mode %q is invalid: must be %q or %q", mode, addon.ModeManaged, addon.ModeAutonomous)
	}
	argoCDVersion, err := release(argoCDVersion)
	if err != nil {
		return nil, err
	}
	all, err := upstreamObjects(argoCDVersion)
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(all))
	for _, o := range all {
		if mode == addon.ModeManaged && isAppSet(o) {
			continue
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// upstreamObjects decodes the embedded manifests. Their decoded form is several times their
// size, so it is not kept: what callers derive from them (the images, the rendered manifests)
// is kept instead.
func upstreamObjects(argoCDVersion string) ([]*unstructured.Unstructured, error) {
	paths, err := fs.Glob(upstreamFS, path.Join("upstream", argoCDVersion, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no objects of Argo CD %s are embedded", argoCDVersion)
	}
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		raw, err := upstreamFS.ReadFile(p)
		if err != nil {
			return nil, err
		}
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(p), err)
		}
		objs = append(objs, o)
	}
	sort.SliceStable(objs, func(i, j int) bool { return kindOrder(objs[i].GetKind()) < kindOrder(objs[j].GetKind()) })
	return objs, nil
}

func isAppSet(o *unstructured.Unstructured) bool {
	if o.GetKind() == "CustomResourceDefinition" {
		return o.GetName() == appSetCRDName
	}
	return o.GetLabels()[addon.LabelName] == appSetControllerName
}

func kindOrder(kind string) int {
	for i, k := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ConfigMap", "Secret", "Service", "NetworkPolicy", "Deployment", "StatefulSet"} {
		if k == kind {
			return i
		}
	}
	return 100
}

// UpstreamImages reads the images the default pair's manifests run (see UpstreamImagesOf).
func UpstreamImages() (Images, error) { return UpstreamImagesOf(version.ArgoCDVersion) }

// UpstreamImagesOf reads the images the manifests of an Argo CD release run, once per release.
func UpstreamImagesOf(argoCDVersion string) (Images, error) {
	argoCDVersion, err := release(argoCDVersion)
	if err != nil {
		return Images{}, err
	}
	once, _ := upstreamImages.LoadOrStore(argoCDVersion, sync.OnceValues(func() (Images, error) { return readImages(argoCDVersion) }))
	return once.(func() (Images, error))()
}

// upstreamImages holds one sync.OnceValues per release.
var upstreamImages sync.Map

func readImages(argoCDVersion string) (Images, error) {
	objs, err := upstreamObjects(argoCDVersion)
	if err != nil {
		return Images{}, err
	}
	var imgs Images
	for _, o := range objs {
		for _, c := range containers(o) {
			image, _, _ := unstructured.NestedString(c, "image")
			switch {
			case isArgoCDImage(image):
				if imgs.ArgoCD != "" && imgs.ArgoCD != image {
					return Images{}, fmt.Errorf("the manifests name two Argo CD images, %s and %s", imgs.ArgoCD, image)
				}
				imgs.ArgoCD = image
			case isRedisImage(image):
				imgs.Redis = image
			default:
				return Images{}, fmt.Errorf("%s %s runs image %s, which the builder does not know", o.GetKind(), o.GetName(), image)
			}
		}
	}
	if imgs.ArgoCD == "" || imgs.Redis == "" {
		return Images{}, fmt.Errorf("the manifests name no Argo CD or no redis image (%+v)", imgs)
	}
	return imgs, nil
}

func isArgoCDImage(image string) bool {
	repo, _, _ := strings.Cut(image, ":")
	return strings.HasSuffix(repo, "/argoproj/argocd")
}

func isRedisImage(image string) bool {
	repo, _, _ := strings.Cut(image, ":")
	return strings.HasSuffix(repo, "/redis")
}

// BuildAddOnTemplate renders the components AddOnTemplate. It has no registration: the Argo CD
// pods need no hub identity, and OCM mounts a registration's client certificate into every
// Deployment of a template, so keeping the components out of the agent's template keeps the
// agent's private key out of the repo-server and the other Argo CD pods.
func BuildAddOnTemplate(in Input) (*addonv1alpha1.AddOnTemplate, error) {
	if errs := validation.IsDNS1123Subdomain(in.TemplateName); len(errs) > 0 {
		return nil, fmt.Errorf("template name %q is invalid: %s", in.TemplateName, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(in.AddonName); len(errs) > 0 {
		return nil, fmt.Errorf("addon name %q is invalid: %s", in.AddonName, strings.Join(errs, "; "))
	}
	for _, s := range in.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return nil, fmt.Errorf("image pull secret name %q is invalid: %s", s, strings.Join(errs, "; "))
		}
	}
	manifests, err := renderedManifests(in)
	if err != nil {
		return nil, err
	}
	t := &addonv1alpha1.AddOnTemplate{}
	t.APIVersion = addonv1alpha1.GroupVersion.String()
	t.Kind = "AddOnTemplate"
	t.Name = in.TemplateName
	t.Labels = map[string]string{addon.LabelManagedBy: v1alpha1.ManagedByValue, addon.LabelPartOf: addon.PartOfValue}
	t.Spec.AddonName = in.AddonName
	t.Spec.AgentSpec.Workload.Manifests = manifests
	t.Spec.AgentSpec.ManifestConfigs = createOnly()
	return t, nil
}

// renderKey is what the rendered manifests depend on: not the template's name.
type renderKey struct {
	addonName, argoCDVersion, mode, pullSecrets string
	assignedUserIDs                             bool
}

// rendered holds the manifests rendered per renderKey. A hub has a few keys (the modes and the
// paired releases its GitOpsClusters use), and rendering half a megabyte of JSON on every reconcile of every
// GitOpsCluster was the largest cost of a reconcile that changes nothing.
var rendered sync.Map

// renderedManifests returns fresh copies of the manifests for in, rendering them once per key.
func renderedManifests(in Input) ([]workv1.Manifest, error) {
	argoCDVersion, err := releaseOf(in)
	if err != nil {
		return nil, err
	}
	key := renderKey{addonName: in.AddonName, argoCDVersion: argoCDVersion, mode: in.Mode, pullSecrets: strings.Join(in.ImagePullSecrets, ","), assignedUserIDs: in.AssignedUserIDs}
	cached, ok := rendered.Load(key)
	if !ok {
		objs, err := ObjectsOf(argoCDVersion, in.Mode)
		if err != nil {
			return nil, err
		}
		// Where the addon installs Argo CD, it also lets OCM's work agent apply the basic pull
		// model's Applications there, and makes the project argocd-server would have made.
		objs = append(objs, agentToRedisPolicy(), PullModelWorkAgentRole(), defaultAppProject())
		raws := make([][]byte, 0, len(objs))
		for _, o := range objs {
			if err := adapt(o, in); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			raw, err := compactJSON(o.Object)
			if err != nil {
				return nil, err
			}
			raws = append(raws, raw)
		}
		cached, _ = rendered.LoadOrStore(key, raws)
	}
	raws := cached.([][]byte)
	manifests := make([]workv1.Manifest, len(raws))
	for i, raw := range raws {
		manifests[i].Raw = slices.Clone(raw)
	}
	return manifests, nil
}

// AgentRedisPolicyName names the NetworkPolicy that lets the agent reach redis.
const AgentRedisPolicyName = "argocd-agent-agent-redis-network-policy"

// agentToRedisPolicy admits the argocd-agent agent to redis: Argo CD's own redis policy admits
// only Argo CD's components, and policies add up, so a second one opens exactly this path.
func agentToRedisPolicy() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1",
		"kind":       "NetworkPolicy",
		"metadata":   map[string]any{"name": AgentRedisPolicyName},
		"spec": map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{addon.LabelName: "argocd-redis"}},
			"policyTypes": []any{"Ingress"},
			"ingress": []any{map[string]any{
				"from":  []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{addon.LabelName: addon.AgentName}}}},
				"ports": []any{map[string]any{"protocol": "TCP", "port": int64(6379)}},
			}},
		},
	}}
}

// ClusterRoleName is the name a cluster-scoped RBAC object of the core install gets: Argo CD's own
// install names them after the component only, so an Argo CD already installed in another
// namespace would otherwise have its ClusterRoleBinding rebound to the addon's ServiceAccount.
// The {{INSTALL_NAMESPACE}} tag keeps installs into two namespaces of one cluster apart.
func ClusterRoleName(addonName, upstreamName string) string {
	return addonName + ":" + upstreamName + ":{{" + addon.VarInstallNamespace + "}}"
}

func adapt(o *unstructured.Unstructured, in Input) error {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelInstalledBy] = in.AddonName
	o.SetLabels(labels)

	if !clusterScoped[o.GetKind()] {
		// OCM's template addon moves every namespaced object to the ADC's agentInstallNamespace.
		o.SetNamespace(addon.DefaultAgentInstallNamespace)
	}
	switch o.GetKind() {
	case "CustomResourceDefinition":
		// Deleting a CRD deletes every Application on the cluster; the CRDs stay when the addon
		// is removed, as Helm leaves the CRDs of a chart.
		annotations := o.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[addonv1alpha1.DeletionOrphanAnnotationKey] = ""
		o.SetAnnotations(annotations)
		// OCM keeps the rendered components once per cluster in ManifestWorks: the schema's
		// documentation is two thirds of the Application CRD, and at 5,000 clusters it alone
		// would take over 600 MB of the hub's etcd. kubectl explain shows no field
		// documentation for these CRDs on the clusters.
		stripDescriptions(o.Object["spec"])
		if o.GetName() == applicationCRDName {
			if err := keepStatusUnvalidated(o); err != nil {
				return err
			}
		}
	case "ClusterRole":
		o.SetName(ClusterRoleName(in.AddonName, o.GetName()))
	case "ClusterRoleBinding":
		o.SetName(ClusterRoleName(in.AddonName, o.GetName()))
		ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if err := unstructured.SetNestedField(o.Object, ClusterRoleName(in.AddonName, ref), "roleRef", "name"); err != nil {
			return err
		}
	case "Deployment", "StatefulSet":
		return adaptPodTemplate(o, in)
	}
	return nil
}

func adaptPodTemplate(o *unstructured.Unstructured, in Input) error {
	for _, field := range []string{"initContainers", "containers"} {
		list, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		if err != nil {
			return err
		}
		for i := range list {
			c := list[i].(map[string]any)
			image, _ := c["image"].(string)
			switch {
			case isArgoCDImage(image):
				c["image"] = "{{" + addon.VarArgoCDImage + "}}"
			case isRedisImage(image):
				c["image"] = "{{" + addon.VarRedisImage + "}}"
			default:
				return fmt.Errorf("container %v runs image %q, which the builder does not know", c["name"], image)
			}
		}
		if len(list) > 0 {
			if err := unstructured.SetNestedSlice(o.Object, list, "spec", "template", "spec", field); err != nil {
				return err
			}
		}
	}
	if in.AssignedUserIDs {
		dropFixedIDs(o)
	}
	if len(in.ImagePullSecrets) > 0 {
		refs := make([]any, 0, len(in.ImagePullSecrets))
		for _, s := range in.ImagePullSecrets {
			refs = append(refs, map[string]any{"name": s})
		}
		if err := unstructured.SetNestedSlice(o.Object, refs, "spec", "template", "spec", "imagePullSecrets"); err != nil {
			return err
		}
	}
	return nil
}

// applicationCRDName is Argo CD's Application CRD.
const applicationCRDName = "applications.argoproj.io"

// keepStatusUnvalidated replaces the schema of an Application's status, two thirds of the CRD
// once descriptions are gone (the operation state, history, sync and hydrator status repeat
// the source schemas), with "any object": only Argo CD's controllers write the status, from
// their own types, by merge patch, and the printer columns still read it. Users' input (spec,
// operation) keeps its validation.
func keepStatusUnvalidated(o *unstructured.Unstructured) error {
	versions, _, err := unstructured.NestedSlice(o.Object, "spec", "versions")
	if err != nil {
		return err
	}
	for _, v := range versions {
		props, _, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties")
		if _, ok := props["status"]; !ok {
			return fmt.Errorf("version %v has no status schema", v.(map[string]any)["name"])
		}
		if err := unstructured.SetNestedField(v.(map[string]any), map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			"schema", "openAPIV3Schema", "properties", "status"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(o.Object, versions, "spec", "versions")
}

// stripDescriptions removes the documentation of an OpenAPI schema, in place: every
// "description" whose value is a string. A property that is named description has a schema
// (an object) as its value and stays.
func stripDescriptions(v any) {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["description"].(string); ok {
			delete(t, "description")
		}
		for _, child := range t {
			stripDescriptions(child)
		}
	case []any:
		for _, child := range t {
			stripDescriptions(child)
		}
	}
}

// dropFixedIDs removes runAsUser, runAsGroup and fsGroup from a workload's pod and containers.
func dropFixedIDs(o *unstructured.Unstructured) {
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if spec == nil {
		return
	}
	drop := func(sc any) {
		if m, ok := sc.(map[string]any); ok {
			delete(m, "runAsUser")
			delete(m, "runAsGroup")
			delete(m, "fsGroup")
		}
	}
	drop(spec["securityContext"])
	for _, field := range []string{"initContainers", "containers"} {
		list, _ := spec[field].([]any)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				drop(m["securityContext"])
			}
		}
	}
	_ = unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
}

func containers(o *unstructured.Unstructured) []map[string]any {
	var out []map[string]any
	for _, field := range []string{"initContainers", "containers"} {
		list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
		for _, c := range list {
			if m, ok := c.(map[string]any); ok {
				out = append(out, m)
			}
		}
	}
	return out
}

// compactJSON encodes as the API server re-encodes a stored manifest (keys sorted, <, > and &
// escaped), so a template read back compares equal to a freshly built one and a resync writes
// nothing.
func compactJSON(v any) ([]byte, error) {
	return json.Marshal(v)
}

// RewriteRegistry replaces the registry of an image reference with registry (a host, optionally
// with a port and a path prefix, e.g. mirror.example.com/argo). A reference without a registry
// (docker.io's short form) gets registry prepended. An empty registry leaves the image alone.
func RewriteRegistry(image, registry string) string {
	registry = strings.TrimSuffix(registry, "/")
	if registry == "" {
		return image
	}
	first, rest, found := strings.Cut(image, "/")
	if found && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return registry + "/" + rest
	}
	return registry + "/" + image
}
