package propagation

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
)

// sweeper is the safety net behind the event-driven cleanup: every SweepInterval it checks,
// from the cache, that each pull-model ManifestWork still has a marked hub Application that
// wants it there, and deletes it otherwise.
type sweeper struct{ r *Reconciler }

// NeedLeaderElection: only the leader deletes.
func (s *sweeper) NeedLeaderElection() bool { return true }

func (s *sweeper) Start(ctx context.Context) error {
	t := time.NewTicker(s.r.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if n, err := s.r.Sweep(ctx); err != nil {
				log.FromContext(ctx).Error(err, "pull-model orphan sweep")
			} else if n > 0 {
				log.FromContext(ctx).Info("pull-model orphan sweep deleted ManifestWorks whose hub Application is gone", "count", n)
			}
		}
	}
}

// Sweep deletes every pull-model ManifestWork that no marked hub Application wants, and
// returns how many it deleted.
func (r *Reconciler) Sweep(ctx context.Context) (int, error) {
	return Sweep(ctx, r.Sealer, r.Cache, r.Client, r.Client)
}

// Sweep deletes, through w, every ManifestWork sealed by s and read from r that no marked hub
// Application in r wants, confirmed by a read from live (the API server), and returns how many
// it deleted. A ManifestWork without a valid seal is never deleted, whatever its labels say.
func Sweep(ctx context.Context, s *seal.Sealer, r, live client.Reader, w client.Writer) (int, error) {
	// Read only, never copied: a copy would hold every ManifestWork of the fleet twice until the
	// sweep ends. Delete writes nothing into the object it is given.
	list := &workv1.ManifestWorkList{}
	if err := r.List(ctx, list, client.HasLabels{pullmodel.LabelPull}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		work := &list.Items[i]
		if work.DeletionTimestamp != nil || !Owned(s, work) || wanted(ctx, r, work) || wanted(ctx, live, work) {
			continue
		}
		if err := w.Delete(ctx, work, client.Preconditions{UID: &work.UID}); client.IgnoreNotFound(err) != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// wanted reports whether a ManifestWork is the current one of a live, marked Application. When
// in doubt (a read error) it is kept.
func wanted(ctx context.Context, r client.Reader, w *workv1.ManifestWork) bool {
	a := w.Annotations
	if a[pullmodel.AnnotationHubAppNamespace] == "" || a[pullmodel.AnnotationHubAppName] == "" {
		return true // not one this controller made from an Application
	}
	app := pullmodel.NewApplication()
	err := r.Get(ctx, types.NamespacedName{Namespace: a[pullmodel.AnnotationHubAppNamespace], Name: a[pullmodel.AnnotationHubAppName]}, app, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	}
	if !pullmodel.IsTrue(pullmodel.Label(app, pullmodel.LabelPull)) || app.GetDeletionTimestamp() != nil {
		return false
	}
	if pullmodel.TargetCluster(app) == "" {
		return true // bad input (no cluster named) leaves the last delivery alone
	}
	return w.Namespace == pullmodel.TargetCluster(app) && w.Name == pullmodel.WorkName(app.GetName(), string(app.GetUID()))
}
