package spoke

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/bounded"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// The components addon must never modify an Argo CD it did not install: OCM's work agent takes
// every object it applies, replaces the data of Argo CD's ConfigMaps and Secrets, moves the CRDs
// and controllers to the paired release, and deletes them with the addon. Before the components
// go to a cluster, a probe looks: a ManifestWork of read-only manifests (OCM's ReadOnly update
// strategy: the work agent only reads them and reports whether each exists, with feedback) for
// the objects an Argo CD install always has. An object there without the components addon's
// LabelInstalledBy is another Argo CD's.

// LabelProbe marks the probe ManifestWorks; its value is the GitOpsCluster's key (see
// names.ComponentsKey).
const LabelProbe = "argocd-agent-addon.open-cluster-management.io/argocd-probe"

// Feedback names of a probe's manifests.
const (
	FeedbackInstalledBy = "installedBy"
	FeedbackImage       = "image"
)

// probed are the objects every Argo CD install has: its two workloads in the install namespace,
// the ConfigMap its settings live in, and the Application CRD, which is cluster-wide (an Argo CD
// in another namespace shares it).
func probed(namespace string) []*unstructured.Unstructured {
	obj := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(apiVersion)
		o.SetKind(kind)
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}
	return []*unstructured.Unstructured{
		obj("apps/v1", "StatefulSet", namespace, "argocd-application-controller"),
		obj("apps/v1", "Deployment", namespace, "argocd-repo-server"),
		obj("v1", "ConfigMap", namespace, "argocd-cm"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "applications.argoproj.io"),
	}
}

// installedByPath reads LabelInstalledBy; a key with dots is escaped for Kubernetes JSONPath.
var installedByPath = ".metadata.labels." + strings.ReplaceAll(LabelInstalledBy, ".", `\.`)

// BuildProbe is the probe ManifestWork for the components to be installed into namespace of
// cluster, for the GitOpsCluster whose key is key.
func BuildProbe(name, cluster, namespace, key string, labels map[string]string) (*workv1.ManifestWork, error) {
	w := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster, Labels: map[string]string{LabelProbe: key}}}
	for k, v := range labels {
		w.Labels[k] = v
	}
	for _, o := range probed(namespace) {
		raw, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		paths := []workv1.JsonPath{{Name: FeedbackInstalledBy, Path: installedByPath}}
		if o.GetKind() == "StatefulSet" || o.GetKind() == "Deployment" {
			// Every pod template has a first container.
			paths = append(paths, workv1.JsonPath{Name: FeedbackImage, Path: ".spec.template.spec.containers[0].image"})
		}
		w.Spec.ManifestConfigs = append(w.Spec.ManifestConfigs, workv1.ManifestConfigOption{
			ResourceIdentifier: workv1.ResourceIdentifier{Group: o.GroupVersionKind().Group, Resource: strings.ToLower(o.GetKind()) + "s", Namespace: o.GetNamespace(), Name: o.GetName()},
			FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: paths}},
			UpdateStrategy:     &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeReadOnly},
			// The API server's default, set so that a stored probe equals a built one.
			FeedbackScrapeType: workv1.FeedbackPollType,
		})
	}
	return w, nil
}

// reasonResourceNotAvailable is the reason OCM's work agent gives a ManifestAvailable=False
// condition when the object does not exist (other reasons say it could not read it).
const reasonResourceNotAvailable = "ResourceNotAvailable"

// Verdict is what a probe found.
type Verdict int

const (
	// ProbeUnknown: the work agent has not reported on the probe's current generation.
	ProbeUnknown Verdict = iota
	// ProbeClear: none of the probed objects exists, or each is the components addon's.
	ProbeClear
	// ProbeForeign: an Argo CD the components addon did not install is there.
	ProbeForeign
)

// ReadProbe tells what the work agent reported for a probe: for ProbeForeign, what it found
// ("StatefulSet argocd/argocd-application-controller (quay.io/argoproj/argocd:v3.6.1)").
// addonName is the components addon, whose objects carry LabelInstalledBy=addonName.
func ReadProbe(w *workv1.ManifestWork, addonName string) (Verdict, string) {
	if w == nil {
		return ProbeUnknown, ""
	}
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	if applied == nil || applied.ObservedGeneration != w.Generation || len(w.Status.ResourceStatus.Manifests) < len(w.Spec.Workload.Manifests) {
		return ProbeUnknown, ""
	}
	// The status must be about the objects the spec names now (a probe whose namespace
	// changed reports the old one until the work agent catches up).
	want := map[string]bool{}
	for _, c := range w.Spec.ManifestConfigs {
		want[c.ResourceIdentifier.Resource+"/"+c.ResourceIdentifier.Namespace+"/"+c.ResourceIdentifier.Name] = true
	}
	var found []string
	for _, m := range w.Status.ResourceStatus.Manifests {
		if !want[m.ResourceMeta.Resource+"/"+m.ResourceMeta.Namespace+"/"+m.ResourceMeta.Name] {
			return ProbeUnknown, ""
		}
		available := meta.FindStatusCondition(m.Conditions, workv1.ManifestAvailable)
		if available == nil || available.ObservedGeneration != w.Generation && available.ObservedGeneration != 0 {
			return ProbeUnknown, ""
		}
		switch {
		case available.Status == metav1.ConditionTrue:
		case available.Status == metav1.ConditionFalse && available.Reason == reasonResourceNotAvailable:
			continue // absent
		default:
			// The work agent could not read it (FetchingResourceFailed, ...): not an answer.
			return ProbeUnknown, ""
		}
		values := map[string]string{}
		for _, v := range m.StatusFeedbacks.Values {
			if v.Value.String != nil {
				values[v.Name] = *v.Value.String
			}
		}
		if values[FeedbackInstalledBy] == addonName {
			continue
		}
		what := m.ResourceMeta.Kind + " " + m.ResourceMeta.Name
		if m.ResourceMeta.Namespace != "" {
			what = m.ResourceMeta.Kind + " " + m.ResourceMeta.Namespace + "/" + m.ResourceMeta.Name
		}
		if img := values[FeedbackImage]; img != "" {
			what += fmt.Sprintf(" (%s)", img)
		}
		found = append(found, what)
	}
	if len(found) > 0 {
		return ProbeForeign, strings.Join(found, ", ")
	}
	return ProbeClear, ""
}

// ProbeSelector selects the probe ManifestWorks, for the manager's cache.
func ProbeSelector() labels.Selector {
	req, err := labels.NewRequirement(LabelProbe, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// ProbedControllerImage is the image of the application-controller the probe found, "" when
// there is none (or the probe has not answered).
func ProbedControllerImage(w *workv1.ManifestWork) string {
	if w == nil {
		return ""
	}
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Kind != "StatefulSet" || m.ResourceMeta.Name != "argocd-application-controller" {
			continue
		}
		if !meta.IsStatusConditionTrue(m.Conditions, workv1.ManifestAvailable) {
			return ""
		}
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name == FeedbackImage && v.Value.String != nil {
				return *v.Value.String
			}
		}
	}
	return ""
}

// ImageTag is the tag of an image reference ("" for a digest-only or untagged one).
func ImageTag(image string) string { return version.ImageTag(image) }

// probedByNamespace holds, per install namespace, the identities of the objects a probe reads
// (read only once stored): a pass checks every probe of a fleet, twice.
var probedByNamespace sync.Map

func probeIdentities(namespace string) map[workv1.ResourceIdentifier]bool {
	if v, ok := probedByNamespace.Load(namespace); ok {
		return v.(map[workv1.ResourceIdentifier]bool)
	}
	want := map[workv1.ResourceIdentifier]bool{}
	for _, o := range probed(namespace) {
		want[workv1.ResourceIdentifier{Group: o.GroupVersionKind().Group, Resource: strings.ToLower(o.GetKind()) + "s", Namespace: o.GetNamespace(), Name: o.GetName()}] = true
	}
	v, _ := probedByNamespace.LoadOrStore(namespace, want)
	return v.(map[workv1.ResourceIdentifier]bool)
}

// ProbeCurrent reports whether a stored probe looks at the objects BuildProbe would for
// namespace (compared by what it reads, not by the whole spec, which the API server defaults).
func ProbeCurrent(w *workv1.ManifestWork, namespace string) bool {
	want := probeIdentities(namespace)
	if len(w.Spec.ManifestConfigs) != len(want) || len(w.Spec.Workload.Manifests) != len(want) {
		return false
	}
	for _, c := range w.Spec.ManifestConfigs {
		if !want[c.ResourceIdentifier] || c.UpdateStrategy == nil || c.UpdateStrategy.Type != workv1.UpdateStrategyTypeReadOnly {
			return false
		}
	}
	return true
}

// TrimProbe is the manager cache's transform for probes: it keeps what ReadProbe, ProbeCurrent
// and ProbedControllerImage read (metadata, generation, the objects' identities and update
// strategies, the number of manifests, the conditions' types, statuses, reasons and generations,
// the feedback values) and drops the rest (the manifests' bodies, the feedback rules, messages
// and times, managed fields): a fleet holds one probe per cluster, and probes are never written
// back, only created anew or deleted. The configs and the emptied manifests, alike in every
// probe of one install namespace, are one shared copy.
func TrimProbe(o any) (any, error) {
	w, ok := o.(*workv1.ManifestWork)
	if !ok {
		return o, nil
	}
	w.ManagedFields = nil
	w.Spec.Workload.Manifests = emptyManifests(len(w.Spec.Workload.Manifests))
	for i := range w.Spec.ManifestConfigs {
		w.Spec.ManifestConfigs[i].FeedbackRules = nil
	}
	w.Spec.ManifestConfigs = sharedConfigs(w.Spec.ManifestConfigs)
	w.Spec.DeleteOption, w.Spec.Executor = nil, nil
	trimConditions(w.Status.Conditions)
	for i := range w.Status.ResourceStatus.Manifests {
		trimConditions(w.Status.ResourceStatus.Manifests[i].Conditions)
	}
	return w, nil
}

// emptyManifests is a shared slice of n empty manifests: a trimmed probe keeps only how many
// it has. Cached objects are never changed in place, so probes may share it.
func emptyManifests(n int) []workv1.Manifest {
	if n == 0 {
		return nil
	}
	if n > len(noManifests) {
		return make([]workv1.Manifest, n)
	}
	return noManifests[:n:n]
}

var noManifests [16]workv1.Manifest

// sharedConfigs returns one shared copy of each list of manifest configs (the feedback rules
// already dropped). Every probe of a fleet that installs into one namespace has the same four,
// about a kilobyte of the cache per cluster when each probe keeps its own.
func sharedConfigs(configs []workv1.ManifestConfigOption) []workv1.ManifestConfigOption {
	if len(configs) == 0 {
		return configs
	}
	key, err := json.Marshal(configs)
	if err != nil {
		return configs
	}
	return probeConfigs.LoadOrStore(string(key), slices.Clip(configs))
}

// probeConfigs holds the configs of probes by their JSON, a few per install namespace.
var probeConfigs = bounded.NewMap[string, []workv1.ManifestConfigOption](256)

func trimConditions(cs []metav1.Condition) {
	for i := range cs {
		cs[i].Message, cs[i].LastTransitionTime = "", metav1.Time{}
	}
}
