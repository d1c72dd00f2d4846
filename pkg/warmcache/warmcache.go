// Package warmcache makes a manager's readiness mean that its controllers' informers have
// synced. A controller creates the informers of its watches only when it starts, after the
// manager's caches have started and its readiness check has begun to pass, so on a large hub
// the manager reported ready while its controllers still waited for tens of thousands of
// objects. Informers created here start with their cache, before any controller.
package warmcache

import (
	"context"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Warm creates c's informers for objs now, so that they start with c rather than with the
// controllers that watch them, and adds a readiness check, named name, that passes once every
// informer of c has synced. It must be called before the manager starts.
func Warm(ctx context.Context, mgr manager.Manager, name string, c cache.Cache, objs ...client.Object) error {
	for _, o := range objs {
		if _, err := c.GetInformer(ctx, o, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("informer for %T: %w", o, err)
		}
	}
	return mgr.AddReadyzCheck(name, func(req *http.Request) error {
		if !c.WaitForCacheSync(req.Context()) {
			return fmt.Errorf("the %s cache has not synced", name)
		}
		return nil
	})
}
