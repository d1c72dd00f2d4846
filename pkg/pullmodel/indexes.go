package pullmodel

import (
	"context"

	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Field indexes on the cached objects, so that an event costs a lookup, not a scan.
const (
	// IndexWorkByApp indexes ManifestWorks by AppKey of their hub Application.
	IndexWorkByApp = "pullmodel.work.app"
	// IndexWorkByApplicationSet indexes ManifestWorks by "<namespace>/<name>" of the
	// ApplicationSet owning their hub Application.
	IndexWorkByApplicationSet = "pullmodel.work.applicationset"
	// IndexAppByCluster indexes marked Applications by their target cluster.
	IndexAppByCluster = "pullmodel.app.cluster"
)

// SetupIndexes registers the field indexes the pull-model controllers read.
func SetupIndexes(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &workv1.ManifestWork{}, IndexWorkByApp, func(o client.Object) []string {
		if k := WorkAppKey(o); k != "" {
			return []string{k}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &workv1.ManifestWork{}, IndexWorkByApplicationSet, func(o client.Object) []string {
		if k := o.GetAnnotations()[AnnotationApplicationSet]; k != "" {
			return []string{k}
		}
		return nil
	}); err != nil {
		return err
	}
	return idx.IndexField(ctx, NewApplication(), IndexAppByCluster, func(o client.Object) []string {
		if c := TargetCluster(o); c != "" {
			return []string{c}
		}
		return nil
	})
}
