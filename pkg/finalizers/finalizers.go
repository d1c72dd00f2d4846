// Package finalizers adds and removes a controller's finalizer on an object it reconciles.
//
// A merge patch replaces the whole finalizer list, so each patch is conditional on the version
// read: a finalizer another controller added since then fails the patch with a conflict (and the
// reconcile is retried) instead of being dropped.
package finalizers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Add adds finalizer to obj on the API server, unless obj already has it.
func Add(ctx context.Context, c client.Writer, obj client.Object, finalizer string) error {
	return patch(ctx, c, obj, finalizer, controllerutil.AddFinalizer)
}

// Remove removes finalizer from obj on the API server, unless obj does not have it. An object
// already gone is done with: a copy read from a cache behind the server may still carry the
// finalizer an earlier reconcile removed, and the object went with it.
func Remove(ctx context.Context, c client.Writer, obj client.Object, finalizer string) error {
	return client.IgnoreNotFound(patch(ctx, c, obj, finalizer, controllerutil.RemoveFinalizer))
}

func patch(ctx context.Context, c client.Writer, obj client.Object, finalizer string, change func(client.Object, string) bool) error {
	base := obj.DeepCopyObject().(client.Object)
	if !change(obj, finalizer) {
		return nil
	}
	return c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
