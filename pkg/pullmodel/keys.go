// Package pullmodel is Argo CD's basic pull model on OCM: a hub Application marked for a
// managed cluster is wrapped into a ManifestWork in that cluster's namespace (propagation),
// the spoke's own Argo CD reconciles it, and its sync and health come back through ManifestWork
// status feedback onto the hub Application (status) and into a per-ApplicationSet report
// (report). This package holds what they share: the labels and annotations users already put on
// their Applications, the Argo CD kinds, the cache scope and the wiring.
package pullmodel

import (
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Labels and annotations of the basic pull model, as existing users and the upstream
// argocd-pull-integration controller spell them.
const (
	// LabelPull on a hub Application asks for delivery to a managed cluster; on a ManifestWork
	// it marks one this project wrote.
	LabelPull = "apps.open-cluster-management.io/pull-to-ocm-managed-cluster"
	// LabelApplicationSet ("true") marks a ManifestWork and a spoke Application whose hub
	// Application an ApplicationSet owns.
	LabelApplicationSet = "apps.open-cluster-management.io/application-set"
	// AnnotationCluster names the managed cluster an Application goes to.
	AnnotationCluster = "apps.open-cluster-management.io/ocm-managed-cluster"
	// AnnotationAppNamespace is the spoke namespace of the Application; default: the hub
	// Application's namespace.
	AnnotationAppNamespace = "apps.open-cluster-management.io/ocm-managed-cluster-app-namespace"
	// AnnotationDestinationName and AnnotationDestinationServer replace the spoke
	// Application's destination; without them it deploys to its own cluster.
	AnnotationDestinationName   = "apps.open-cluster-management.io/destination-name"
	AnnotationDestinationServer = "apps.open-cluster-management.io/destination-server"
	// AnnotationSkipReconcile keeps the hub's own Argo CD away from the Application.
	AnnotationSkipReconcile = "argocd.argoproj.io/skip-reconcile"
	// AnnotationHubAppNamespace and AnnotationHubAppName on a ManifestWork name its hub
	// Application.
	AnnotationHubAppNamespace = "apps.open-cluster-management.io/hub-application-namespace"
	AnnotationHubAppName      = "apps.open-cluster-management.io/hub-application-name"
	// AnnotationApplicationSet ("<namespace>/<name>") on a ManifestWork and a spoke
	// Application names the ApplicationSet that owns the hub Application.
	AnnotationApplicationSet = "apps.open-cluster-management.io/hosting-applicationset"
	// AnnotationOperationRequest on a ManifestWork carrying a sync operation names that request:
	// the hub Application's resourceVersion when it was first sent. The spoke's copy of the
	// request carries the name in its info (OperationRequestInfo), which Argo CD copies into the
	// operation state of the run; fed back, it says which request the spoke ran. Start times
	// cannot: they have whole seconds, and RollingSync asks again with the very same request,
	// which the spoke may run within the second of the run before. The name also makes a request
	// equal to one already run a new payload, which the work agent then hands to the spoke.
	AnnotationOperationRequest = "apps.open-cluster-management.io/operation-request"
	// OperationRequestInfo is the name of the info entry of the spoke's sync operation that
	// holds AnnotationOperationRequest's value.
	OperationRequestInfo = "apps.open-cluster-management.io/operation-request"
	// AnnotationOperationBaseline, the spoke's last start time when a request was first sent,
	// named requests before AnnotationOperationRequest did. The next update of a ManifestWork
	// that has it removes it and sends the request again under a name (a request the spoke had
	// already run, not yet cleared on the hub, runs once more: a sync of what is in sync).
	AnnotationOperationBaseline = "apps.open-cluster-management.io/operation-baseline"
	// AnnotationRefresh is Argo CD's refresh request on an Application; AnnotationRefreshBaseline
	// on a ManifestWork carrying one is when it was first sent (RFC 3339): a later reconcile on
	// the spoke means the spoke refreshed, and the hub's request can be cleared (the hub's own
	// application-controller, kept away by skip-reconcile, never clears it).
	AnnotationRefresh         = "argocd.argoproj.io/refresh"
	AnnotationRefreshBaseline = "apps.open-cluster-management.io/refresh-baseline"
	// AnnotationReleaseWithoutCluster ("true") on a hub Application being deleted releases its
	// resources finalizer without waiting for the cluster to delete the workload (see
	// propagation's offline release).
	AnnotationReleaseWithoutCluster = "apps.open-cluster-management.io/release-without-cluster"
	// LabelProjectWork ("true") marks a ManifestWork that carries a hub AppProject to a cluster
	// for the Applications there that name it (one per cluster and AppProject); with
	// AnnotationHubProject, the name of that hub AppProject.
	LabelProjectWork     = "apps.open-cluster-management.io/appproject-work"
	AnnotationHubProject = "apps.open-cluster-management.io/hub-appproject"
	// AnnotationResourceList on a spoke Application is the list of objects it deploys, written
	// by the cluster's resource reporter (see package resourcelist) and fed back to the hub.
	AnnotationResourceList = "apps.open-cluster-management.io/resource-list"
	// ResourcesFinalizer is Argo CD's cascading-delete finalizer (with optional
	// "/foreground" or "/background" suffixes).
	ResourcesFinalizer = "resources-finalizer.argocd.argoproj.io"
	// InClusterServer is the spoke Application's default destination: its own cluster.
	InClusterServer = "https://kubernetes.default.svc"
	// DefaultArgoCDNamespace is the spoke namespace when the hub Application has none.
	DefaultArgoCDNamespace = "argocd"
)

// Argo CD kinds, handled as unstructured objects: Argo CD's Go module needs a newer Go and
// other Kubernetes libraries than this project.
var (
	ArgoGroupVersion  = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}
	ApplicationGVK    = ArgoGroupVersion.WithKind("Application")
	ApplicationSetGVK = ArgoGroupVersion.WithKind("ApplicationSet")
	AppProjectGVK     = ArgoGroupVersion.WithKind("AppProject")
)

// NewApplication returns an empty unstructured Application.
func NewApplication() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ApplicationGVK)
	return u
}

// NewApplicationList returns an empty unstructured Application list.
func NewApplicationList() *unstructured.UnstructuredList {
	u := &unstructured.UnstructuredList{}
	u.SetGroupVersionKind(ArgoGroupVersion.WithKind("ApplicationList"))
	return u
}

// IsTrue reads a boolean label or annotation the way the upstream controller does
// (strconv.ParseBool: "true", "True", "1", ...).
func IsTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// Marked reports whether a hub Application asks for pull-model delivery: the pull label is
// true and the cluster annotation names a cluster.
func Marked(o metav1.Object) bool {
	return IsTrue(Label(o, LabelPull)) && TargetCluster(o) != ""
}

// TargetCluster is the managed cluster an Application is marked for.
func TargetCluster(o metav1.Object) string {
	return strings.TrimSpace(Annotation(o, AnnotationCluster))
}

// Annotation is the value of one annotation of o ("" when it has none). An unstructured
// object's GetAnnotations copies all of them, at every call; this reads the one in place.
func Annotation(o metav1.Object, key string) string {
	v, _ := LookupAnnotation(o, key)
	return v
}

// LookupAnnotation is Annotation, and whether o has the annotation at all.
func LookupAnnotation(o metav1.Object, key string) (string, bool) {
	return lookupMetadata(o, "annotations", key, o.GetAnnotations)
}

// Label is the value of one label of o ("" when it has none), read in place as Annotation.
func Label(o metav1.Object, key string) string {
	v, _ := lookupMetadata(o, "labels", key, o.GetLabels)
	return v
}

func lookupMetadata(o metav1.Object, field, key string, all func() map[string]string) (string, bool) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		v, found := all()[key]
		return v, found
	}
	m, _, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", field)
	values, _ := m.(map[string]any)
	v, found := values[key].(string)
	return v, found
}

// ProjectOf is the AppProject an Application names; Argo CD reads an empty one as "default".
func ProjectOf(app *unstructured.Unstructured) string {
	if p, _, _ := unstructured.NestedString(app.Object, "spec", "project"); p != "" {
		return p
	}
	return DefaultProject
}

// DefaultProject is the AppProject an Application without one names.
const DefaultProject = "default"

// AppKey is "<namespace>/<name>" of a hub Application, the index value that ties its
// ManifestWorks to it.
func AppKey(namespace, name string) string { return namespace + "/" + name }

// SplitAppKey is AppKey's inverse. ok is false for what no Application's key can be: an empty
// half, or a second "/" (neither a namespace nor a name holds one).
func SplitAppKey(key string) (namespace, name string, ok bool) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name, namespace != "" && name != "" && !strings.Contains(name, "/")
}

// WorkAppKey is the AppKey of the hub Application a ManifestWork was made from, or "" when
// its annotations name none.
func WorkAppKey(o metav1.Object) string {
	a := o.GetAnnotations()
	ns, name := a[AnnotationHubAppNamespace], a[AnnotationHubAppName]
	if ns == "" || name == "" {
		return ""
	}
	return AppKey(ns, name)
}

// OwningApplicationSet is the name of the ApplicationSet among an object's owners, or "".
func OwningApplicationSet(o metav1.Object) string {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == ApplicationSetGVK.Kind && strings.HasPrefix(ref.APIVersion, ArgoGroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// WorkName is the ManifestWork name of a hub Application: its name and the first five
// characters of its UID, as the upstream controller names it (so its ManifestWorks are
// adopted, and a re-created Application never takes over its predecessor's work).
func WorkName(appName, uid string) string {
	if len(uid) > 5 {
		uid = uid[:5]
	}
	return appName + "-" + uid
}
