// Package namespaceindex leaves the namespace index out of the informers of kinds that are
// never listed by namespace.
//
// controller-runtime gives every informer an index by namespace. For a kind with one object in
// each of 10,000 cluster namespaces (a ManagedClusterAddOn, a probe ManifestWork), that index
// is 10,000 sets of one key each: about 2 MB per kind that no read uses when every list of the
// kind is cluster-wide. Without the index, a namespaced list of such a kind fails with
// client-go's "Index with name namespace does not exist" rather than read wrong.
package namespaceindex

import (
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewInformerFunc is the shape of controller-runtime's cache.Options.NewInformer.
type NewInformerFunc = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// Without returns a NewInformer that builds informers as controller-runtime does, except that
// those of the kinds of objs have no namespace index.
func Without(objs ...runtime.Object) NewInformerFunc {
	unindexed := map[reflect.Type]bool{}
	for _, o := range objs {
		unindexed[reflect.TypeOf(o)] = true
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if unindexed[reflect.TypeOf(obj)] {
			if _, ok := indexers[toolscache.NamespaceIndex]; ok {
				kept := toolscache.Indexers{}
				for name, fn := range indexers {
					if name != toolscache.NamespaceIndex {
						kept[name] = fn
					}
				}
				indexers = kept
			}
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}
