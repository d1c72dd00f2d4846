// Package gitopscluster is the GitOpsCluster reconciler: from an OCM Placement to a configured
// argocd-agent fleet (ClusterManagementAddOn entry, AddOnTemplate, AddOnDeploymentConfig, hub
// PKI, principal endpoint, agent registration secrets and status).
package gitopscluster

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/clustersecrets"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/revocation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownwrites"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Reconciler turns one GitOpsCluster into its fleet objects and status.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache where a stale read would do harm; nil uses Client.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    config.Config

	// ComponentsAddOns caches the components addon's ManagedClusterAddOns; SetupWithManager
	// makes it when nil.
	ComponentsAddOns cache.Cache

	departures   revocation.Departures
	signerCheck  principalpki.SignerCheck
	statusWrites ownwrites.Tracker
	// jwtKeys makes the first principal's JWT signing key as the manager starts, before a
	// GitOpsCluster asks for it.
	jwtKeys pki.SpareKey
	// probesInFlight are the probes created that the cache may not show yet.
	probesInFlight addonobjects.ProbesInFlight
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	goc := &v1alpha1.GitOpsCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, goc); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without its finalizer (removed by hand): nothing of it is in flight.
			goc.Namespace, goc.Name = req.Namespace, req.Name
			r.probesInFlight.Forget(names.ProbeWorkName(goc))
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// A pass woken by this manager's own status write works from the written status.
	if err := r.statusWrites.Fresh(ctx, r.Client, goc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !goc.DeletionTimestamp.IsZero() {
		r.statusWrites.Forget(goc.UID)
		return ctrl.Result{}, r.finalize(ctx, goc)
	}
	if !controllerutil.ContainsFinalizer(goc, v1alpha1.Finalizer) {
		if err := finalizers.Add(ctx, r.Client, goc, v1alpha1.Finalizer); err != nil {
			return ctrl.Result{}, err
		}
	}

	return r.reconcileNormal(ctx, goc)
}

func (r *Reconciler) writeStatus(ctx context.Context, goc *v1alpha1.GitOpsCluster, status *v1alpha1.GitOpsClusterStatus) error {
	if equality.Semantic.DeepEqual(goc.Status, *status) {
		return nil
	}
	updated := goc.DeepCopy()
	updated.Status = *status
	// A merge patch carries only what differs from the copy read, so a field emptied since is
	// not cleared when that copy is older than the server's (a cache that has not seen the
	// last write): the patch is conditional on the version read, and a stale read retries.
	if err := r.Client.Status().Patch(ctx, updated, client.MergeFromWithOptions(goc, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.statusWrites.Wrote(goc.UID, goc.ResourceVersion, updated.ResourceVersion)
	return nil
}

// event is where every Event on a GitOpsCluster is born: the pass's (note, event, emit) and
// the deletion's. The parts return theirs as values (config.Event).
func (r *Reconciler) event(goc *v1alpha1.GitOpsCluster, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(goc, nil, eventType, reason, action, note, args...)
	}
}

// emit records on goc the Events a part returned with its result.
func (r *Reconciler) emit(goc *v1alpha1.GitOpsCluster, events []config.Event) {
	for _, e := range events {
		r.event(goc, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
}

// hub is the hub as this reconciler's parts reach it: its clients and config.
func (r *Reconciler) hub() config.Hub {
	// No recorder: the parts return their Events (config.Event) and r.event emits them.
	return config.Hub{Client: r.Client, Reader: r.apiReader(), Config: r.Config}
}

// pki is the principal PKI's keeper, over this reconciler's clients and config.
func (r *Reconciler) pki() *principalpki.Keeper {
	return &principalpki.Keeper{Hub: r.hub(), JWTKeys: &r.jwtKeys}
}

// revoker is the agents' revocation over this reconciler's clients, config and memory of
// departures.
func (r *Reconciler) revoker() *revocation.Revoker {
	return &revocation.Revoker{Hub: r.hub(), Departures: &r.departures}
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// clusterSecrets writes the agents' cluster secrets over this reconciler's clients and config.
func (r *Reconciler) clusterSecrets() *clustersecrets.Writer {
	return &clustersecrets.Writer{Hub: r.hub()}
}
