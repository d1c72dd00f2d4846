package pullmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Field indexes on the cached objects, so that an event costs a lookup, not a scan.
const (
	// indexWorkByApp indexes ManifestWorks by the bucket of the AppKey of their hub Application
	// (ListWorksOfApp reads it).
	indexWorkByApp = "pullmodel.work.app"
	// IndexWorkByApplicationSet indexes ManifestWorks by "<namespace>/<name>" of the
	// ApplicationSet owning their hub Application.
	IndexWorkByApplicationSet = "pullmodel.work.applicationset"
	// IndexAppByCluster indexes marked Applications by their target cluster.
	IndexAppByCluster = "pullmodel.app.cluster"
	// indexWorkBySpokeApplication indexes ManifestWorks by the bucket of SpokeKey of the
	// Application they deliver (ListWorksDelivering reads it).
	indexWorkBySpokeApplication = "pullmodel.work.spoke"
	// IndexAppByProject indexes marked Applications by the AppProject they name.
	IndexAppByProject = "pullmodel.app.project"
	// IndexAppByClusterProject indexes marked Applications by ClusterProjectKey of their target
	// cluster and the AppProject they name.
	IndexAppByClusterProject = "pullmodel.app.clusterproject"
	// IndexWorkByClusterProject indexes Applications' ManifestWorks by ClusterProjectKey of
	// their cluster and the AppProject of the Application they carry: what runs under a project
	// on a cluster, whether or not its hub Application is still authorized.
	IndexWorkByClusterProject = "pullmodel.work.clusterproject"
)

// ClusterProjectKey is "<cluster>/<project>": the Applications of one cluster that name one
// AppProject, which share that project's ManifestWork there.
func ClusterProjectKey(cluster, project string) string { return cluster + "/" + project }

// ForWork maps a ManifestWork event to a reconcile of its hub Application.
func ForWork(_ context.Context, o client.Object) []reconcile.Request {
	a := o.GetAnnotations()
	if a[AnnotationHubAppNamespace] == "" || a[AnnotationHubAppName] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a[AnnotationHubAppNamespace], Name: a[AnnotationHubAppName]}}}
}

// SetupIndexes registers the field indexes the pull-model controllers read, each read across
// namespaces (client.MatchingFields without client.InNamespace: the values that need a
// cluster name it).
func SetupIndexes(ctx context.Context, informers cache.Informers) error {
	idx := acrossNamespaces{informers}
	if err := idx.indexField(ctx, &workv1.ManifestWork{}, indexWorkByApp, func(o client.Object) []string {
		if k := WorkAppKey(o); k != "" {
			return []string{bucketOf(k)}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.indexField(ctx, &workv1.ManifestWork{}, IndexWorkByApplicationSet, func(o client.Object) []string {
		if k := Annotation(o, AnnotationApplicationSet); k != "" {
			return []string{k}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.indexField(ctx, &workv1.ManifestWork{}, indexWorkBySpokeApplication, func(o client.Object) []string {
		if at := SpokeApplicationOf(o.(*workv1.ManifestWork)); at.Name != "" {
			return []string{bucketOf(SpokeKey(o.GetNamespace(), at))}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.indexField(ctx, &workv1.ManifestWork{}, IndexWorkByClusterProject, func(o client.Object) []string {
		if p := DeliveredProject(o.(*workv1.ManifestWork)); p != "" {
			return []string{ClusterProjectKey(o.GetNamespace(), p)}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.indexField(ctx, NewApplication(), IndexAppByCluster, func(o client.Object) []string {
		if c := TargetCluster(o); c != "" {
			return []string{c}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.indexField(ctx, NewApplication(), IndexAppByProject, func(o client.Object) []string {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		return []string{ProjectOf(u)}
	}); err != nil {
		return err
	}
	return idx.indexField(ctx, NewApplication(), IndexAppByClusterProject, func(o client.Object) []string {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || TargetCluster(u) == "" {
			return nil
		}
		return []string{ClusterProjectKey(TargetCluster(u), ProjectOf(u))}
	})
}

// acrossNamespaces registers indexes read only across namespaces. controller-runtime's
// IndexField keys each value of a namespaced object twice, within its namespace and across all,
// so that either kind of read finds it; an index whose values name one object each (a
// ManifestWork's Application) then holds two sets of one per object, some 250 bytes, at 10,000
// Applications 5 MB of the pull model's heap. These are keyed once, with controller-runtime's
// own index name and key (internal.FieldIndexName, internal.KeyToNamespacedKey with no
// namespace), so that a List with client.MatchingFields reads them as it reads IndexField's; a
// List that adds client.InNamespace finds nothing (TestIndexesAreKeyedOnceAcrossNamespaces).
type acrossNamespaces struct{ informers cache.Informers }

func (a acrossNamespaces) indexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	informer, err := a.informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return informer.AddIndexers(toolscache.Indexers{"field:" + field: func(o any) ([]string, error) {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", o)
		}
		values := extract(obj)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = allNamespaces + v
		}
		return keys, nil
	}})
}

// Buckets: an index whose values name one object each costs client-go a set of one per object
// (a map of its own, about 200 bytes, and the value's string: at 10,000 Applications some 5 MB
// for two such indexes). Those indexes key each object by a bucket of its value instead, one
// of indexBuckets, and their readers keep the objects whose value is the one asked for: at
// 10,000 ManifestWorks a read finds about ten and keeps one.
var indexBuckets uint32 = 1024

// bucketOf is the bucket of an index value, in base 36. The indexes live in this process only:
// its own hash seed will do.
func bucketOf(value string) string {
	return strconv.FormatUint(maphash.String(bucketSeed, value)%uint64(indexBuckets), 36)
}

var bucketSeed = maphash.MakeSeed()

// ListWorksOfApp lists into list the cached ManifestWorks made from the hub Application key (its
// AppKey, read from the ManifestWork's annotations). A reader that only reads passes
// client.UnsafeDisableDeepCopy: a copy is made of every ManifestWork of the bucket, before the
// others are dropped.
func ListWorksOfApp(ctx context.Context, c client.Reader, list *workv1.ManifestWorkList, key string, opts ...client.ListOption) error {
	if err := c.List(ctx, list, append(opts, client.MatchingFields{indexWorkByApp: bucketOf(key)})...); err != nil {
		return err
	}
	keepWorks(list, madeFromApp(key))
	return nil
}

// madeFromApp tells whether a ManifestWork was made from the hub Application key. It compares
// the key's halves with the annotations, so that filtering a bucket builds no string per
// ManifestWork.
func madeFromApp(key string) func(*workv1.ManifestWork) bool {
	ns, name, ok := SplitAppKey(key)
	return func(w *workv1.ManifestWork) bool {
		a := w.Annotations
		return ok && a[AnnotationHubAppNamespace] == ns && a[AnnotationHubAppName] == name
	}
}

// ListWorksDelivering lists into list the cached ManifestWorks of cluster that deliver the
// Application at there (client.UnsafeDisableDeepCopy as for ListWorksOfApp).
func ListWorksDelivering(ctx context.Context, c client.Reader, list *workv1.ManifestWorkList, cluster string, at types.NamespacedName, opts ...client.ListOption) error {
	if err := c.List(ctx, list, append(opts, client.MatchingFields{indexWorkBySpokeApplication: bucketOf(SpokeKey(cluster, at))})...); err != nil {
		return err
	}
	keepWorks(list, func(w *workv1.ManifestWork) bool { return w.Namespace == cluster && SpokeApplicationOf(w) == at })
	return nil
}

// keepWorks drops from list the ManifestWorks for which keep is false, in place.
func keepWorks(list *workv1.ManifestWorkList, keep func(*workv1.ManifestWork) bool) {
	n := 0
	for i := range list.Items {
		if keep(&list.Items[i]) {
			list.Items[n] = list.Items[i]
			n++
		}
	}
	clear(list.Items[n:])
	list.Items = list.Items[:n]
}

// allNamespaces prefixes controller-runtime's index keys for a read across namespaces.
const allNamespaces = "__all_namespaces/"

// DeliveredProject is the AppProject the Application a pull-model ManifestWork carries names, or
// "" for any other ManifestWork. Only the kind and the project are decoded: this runs at every
// change of every cached ManifestWork, status writes included.
func DeliveredProject(w *workv1.ManifestWork) string {
	if !IsTrue(w.Labels[LabelPull]) || IsTrue(w.Labels[LabelProjectWork]) || len(w.Spec.Workload.Manifests) == 0 {
		return ""
	}
	var app struct {
		Kind string `json:"kind"`
		Spec struct {
			Project string `json:"project"`
		} `json:"spec"`
	}
	if json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &app) != nil || app.Kind != "Application" {
		return ""
	}
	if app.Spec.Project == "" {
		return DefaultProject
	}
	return app.Spec.Project
}

// SpokeKey is "<cluster>/<namespace>/<name>" of an Application on a cluster.
func SpokeKey(cluster string, at types.NamespacedName) string {
	return cluster + "/" + at.Namespace + "/" + at.Name
}

// SpokeApplicationOf is the Application on the cluster that a pull-model ManifestWork
// delivers, read from its feedback configuration; empty when it names none.
func SpokeApplicationOf(w *workv1.ManifestWork) types.NamespacedName {
	for _, c := range w.Spec.ManifestConfigs {
		if c.ResourceIdentifier.Group == ArgoGroupVersion.Group && c.ResourceIdentifier.Resource == "applications" {
			return types.NamespacedName{Namespace: c.ResourceIdentifier.Namespace, Name: c.ResourceIdentifier.Name}
		}
	}
	return types.NamespacedName{}
}
