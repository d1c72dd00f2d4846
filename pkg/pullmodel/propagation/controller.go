package propagation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// Reconciler keeps one ManifestWork per marked hub Application, keyed by the Application.
type Reconciler struct {
	// Client writes, and reads ManagedClusters from the manager's cache.
	Client client.Client
	// Cache holds the pull model's own objects (marked Applications, its ManifestWorks); its
	// controllers watch and read them there.
	Cache cache.Cache
	// APIReader reads around the caches, to confirm a deletion the caches decided; the
	// manager's when nil.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Concurrency is how many Applications are reconciled at once.
	Concurrency int
	// SweepInterval is how often every ManifestWork of the pull model is checked for a hub
	// Application (a safety net: deletions are handled as they happen).
	SweepInterval time.Duration
	// Now is the clock of condition times.
	Now func() time.Time
	// Policy is what the hub operator allows the pull model to deliver.
	Policy Policy
	// Sealer seals the ManifestWorks this controller writes; only a sealed ManifestWork is
	// ever deleted (see package seal).
	Sealer *seal.Sealer
	// OfflineRelease is how long a deleted Application waits for the deletion of its
	// ManifestWork on an unavailable cluster before its finalizer is released; 0 waits always.
	OfflineRelease time.Duration
}

// SetupWithManager registers the controller and its periodic orphan sweep.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = recorder.For(mgr, "argocd-agent-addon-pullmodel")
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Concurrency < 1 {
		r.Concurrency = 1
	}
	if r.SweepInterval > 0 {
		if err := mgr.Add(&sweeper{r: r}); err != nil {
			return err
		}
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("pullmodel-propagation").
		WatchesRawSource(source.Kind[client.Object](r.Cache, pullmodel.NewApplication(), &handler.EnqueueRequestForObject{}, deliveryInputChanged())).
		// A ManifestWork changed or went away: its Application decides whether it should be
		// there (this also removes, at start-up, works whose Application was deleted while the
		// manager was down). Status updates alone are the status controller's.
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(pullmodel.ForWork),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, deleted()))).
		// A cluster registered, accepted, moved between sets, or named like a source namespace.
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.forCluster), builder.WithPredicates(clusterAuthorizationChanged())).
		// Tenancy and projects decide delivery at every pass: their changes wake the
		// Applications they concern.
		WatchesRawSource(source.Kind[client.Object](r.Cache, &clusterv1beta2.ManagedClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.forNamespace))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &clusterv1beta2.ManagedClusterSet{}, handler.EnqueueRequestsFromMapFunc(r.forClusterSet))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, NewAppProject(), handler.EnqueueRequestsFromMapFunc(r.forProject))).
		// A new Application waits for its AppProject's ManifestWork to be applied.
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(r.appsOfProjectWork), projectReadinessChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(r); err != nil {
		return err
	}
	// The AppProjects' ManifestWorks, one per cluster and project, keyed by both: the
	// Applications for the cluster that name the project, their rights and the project decide it.
	keysOf := func(wake func(context.Context, client.Object) []reconcile.Request) handler.MapFunc {
		return func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.projectKeysFor(ctx, wake(ctx, o))
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pullmodel-projects").
		WatchesRawSource(source.Kind[client.Object](r.Cache, pullmodel.NewApplication(), appProjectHandler(), applicationInputChanged(false))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(forProjectWork), projectWorkChanged())).
		// An Application's ManifestWork keeps its project delivered, refused or not, until it goes.
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, appWorkProjectHandler(),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, deleted()))).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(keysOf(r.forCluster)), builder.WithPredicates(clusterAuthorizationChanged())).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &clusterv1beta2.ManagedClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(keysOf(r.forNamespace)))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &clusterv1beta2.ManagedClusterSet{}, handler.EnqueueRequestsFromMapFunc(keysOf(r.forClusterSet)))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, NewAppProject(), handler.EnqueueRequestsFromMapFunc(keysOf(r.forProject)))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(&projectReconciler{r: r})
}

// Reconcile brings an Application's ManifestWorks in line with the Application.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := pullmodel.AppKey(req.Namespace, req.Name)
	// Every read of a reconcile is from a cache and without a copy (the Application, its
	// ManifestWorks, the cluster, bindings, sets and AppProject the checks read), read only: a
	// write starts from a copy (dropProject; apply copies the labels and annotations it changes)
	// or decodes the answer into an object of its own (patchApplication, sealLegacy, apply's
	// metadata); SpokeProject copies what it takes from a project. This
	// runs at every change of every Application.
	app := pullmodel.NewApplication()
	if err := r.Cache.Get(ctx, req.NamespacedName, app, client.UnsafeDisableDeepCopy); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		// Deleting a ManifestWork deletes a workload: confirm with a live read (the manager's
		// client reads Applications from the API server) that the cache is not just behind.
		// Gone, or no longer labelled (it left the cache's selection), both mean undeliver.
		live := pullmodel.NewApplication()
		switch err := r.Client.Get(ctx, req.NamespacedName, live); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return ctrl.Result{}, err
		case pullmodel.IsTrue(pullmodel.Label(live, pullmodel.LabelPull)):
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		_, err := r.deleteWorks(ctx, key, nil)
		return ctrl.Result{}, err
	}
	if !pullmodel.IsTrue(pullmodel.Label(app, pullmodel.LabelPull)) {
		_, err := r.deleteWorksOf(ctx, app, nil)
		return ctrl.Result{}, err
	}
	if pullmodel.TargetCluster(app) == "" {
		// Labelled but no cluster named: say so, and leave an earlier delivery alone.
		if app.GetDeletionTimestamp() != nil {
			return r.reconcileDelete(ctx, app, key)
		}
		return ctrl.Result{}, r.setCondition(ctx, app, checkClusterNamed(app))
	}
	if app.GetDeletionTimestamp() != nil {
		return r.reconcileDelete(ctx, app, key)
	}
	return r.reconcileNormal(ctx, app, key)
}

// Owned reports whether a ManifestWork is one the pull model wrote: its seal covers its name,
// namespace and the hub Application and ApplicationSet its annotations name.
func Owned(s *seal.Sealer, w *workv1.ManifestWork) bool {
	return s != nil && s.Verify(SealFields(w), w.Annotations[seal.Annotation])
}

// SealFields are the fields of a ManifestWork its seal covers.
func SealFields(w *workv1.ManifestWork) seal.Fields {
	return seal.Fields{
		Namespace: w.Namespace, Name: w.Name,
		AppNamespace: w.Annotations[pullmodel.AnnotationHubAppNamespace], AppName: w.Annotations[pullmodel.AnnotationHubAppName],
		ApplicationSet: w.Annotations[pullmodel.AnnotationApplicationSet],
	}
}

// ownedFor reports whether w is the ManifestWork of app: naming app, and sealed, or at the place
// only app's own ManifestWork can have (its name carries app's UID), which covers one written
// before seals existed. A work agent cannot rename a ManifestWork, so the second rule holds
// only for a work made for app; it is sealed at its next update.
func ownedFor(s *seal.Sealer, w *workv1.ManifestWork, app *unstructured.Unstructured) bool {
	if pullmodel.WorkAppKey(w) != pullmodel.AppKey(app.GetNamespace(), app.GetName()) {
		return false
	}
	// A seal that does not verify (a work agent's edit, or a sealing key lost and made anew)
	// counts as none here: the place proves it.
	return Owned(s, w) || (w.Namespace == pullmodel.TargetCluster(app) && w.Name == pullmodel.WorkName(app.GetName(), string(app.GetUID())))
}

// reconcileDelete deletes the Application's ManifestWorks (the work agent then deletes the
// spoke Application, whose own finalizer makes the spoke's Argo CD remove the workload) and,
// once they are gone, releases the hub Application's resources finalizer, which the hub's
// Argo CD, kept away by skip-reconcile, would never release.
func (r *Reconciler) reconcileDelete(ctx context.Context, app *unstructured.Unstructured, key string) (ctrl.Result, error) {
	left, err := r.deleteWorksOf(ctx, app, nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	why := "the ManifestWork is gone"
	if left > 0 {
		release, after, reason, err := r.releaseWithoutCluster(ctx, app)
		if err != nil || !release {
			// The ManifestWork's deletion event requeues too; this is in case it is missed.
			return ctrl.Result{RequeueAfter: after}, err
		}
		why = reason
	}
	if !pullmodel.IsTrue(pullmodel.Annotation(app, pullmodel.AnnotationSkipReconcile)) {
		return ctrl.Result{}, nil
	}
	var keep []string
	for _, f := range app.GetFinalizers() {
		if f != pullmodel.ResourcesFinalizer && !strings.HasPrefix(f, pullmodel.ResourcesFinalizer+"/") {
			keep = append(keep, f)
		}
	}
	if len(keep) == len(app.GetFinalizers()) {
		return ctrl.Result{}, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep, "resourceVersion": app.GetResourceVersion()}})
	if err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("released the resources finalizer: " + why)
	if err := r.patchApplication(ctx, app, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if left > 0 {
		r.Recorder.Eventf(app, nil, corev1.EventTypeWarning, ReasonReleasedWithoutCluster, "Delete",
			"Resources finalizer released while the ManifestWork is still being deleted: %s. OCM's work agent deletes the Application and its workload on the cluster when the cluster is back", why)
	}
	return ctrl.Result{}, nil
}

// ReasonReleasedWithoutCluster is the Event reason of a finalizer released before the cluster
// deleted the workload.
const ReasonReleasedWithoutCluster = "ReleasedWithoutCluster"

// releaseWithoutCluster decides whether a deleted Application's finalizer is released while
// its ManifestWorks are still being deleted, and otherwise when to look again. A cluster that
// is available is deleting the workload: wait for it, however long. One that is unavailable (or
// gone) may never answer: wait OfflineRelease from the ManifestWork's deletion or from the start
// of the outage, whichever is later, so that a brief outage does not count, then release; the
// ManifestWork stays marked for deletion, and OCM's work agent deletes the Application and its
// workload when the cluster returns. The annotation
// AnnotationReleaseWithoutCluster releases at once, whatever the cluster's state (whoever may
// edit the Application may remove its finalizer anyway).
func (r *Reconciler) releaseWithoutCluster(ctx context.Context, app *unstructured.Unstructured) (bool, time.Duration, string, error) {
	const poll = 10 * time.Second
	if pullmodel.IsTrue(pullmodel.Annotation(app, pullmodel.AnnotationReleaseWithoutCluster)) {
		return true, 0, "annotation " + pullmodel.AnnotationReleaseWithoutCluster + " asks for it", nil
	}
	if r.OfflineRelease <= 0 {
		return false, poll, "", nil
	}
	list := &workv1.ManifestWorkList{}
	if err := pullmodel.ListWorksOfApp(ctx, r.Cache, list, pullmodel.AppKey(app.GetNamespace(), app.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		return false, poll, "", err
	}
	var clusters []string
	wait := time.Duration(0)
	for i := range list.Items {
		w := &list.Items[i]
		if !ownedFor(r.Sealer, w, app) {
			continue
		}
		if w.DeletionTimestamp == nil {
			return false, poll, "", nil
		}
		mc := &clusterv1.ManagedCluster{}
		since := w.DeletionTimestamp.Time
		switch err := r.Client.Get(ctx, client.ObjectKey{Name: w.Namespace}, mc); {
		case err == nil && mc.DeletionTimestamp == nil && meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable):
			return false, poll, "", nil
		case err != nil && !apierrors.IsNotFound(err):
			return false, poll, "", err
		case err == nil:
			// The outage must last the whole wait: one that began after the deletion counts
			// from its own start.
			if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil && c.LastTransitionTime.After(since) {
				since = c.LastTransitionTime.Time
			}
		}
		wait = max(wait, since.Add(r.OfflineRelease).Sub(r.Now()))
		clusters = append(clusters, w.Namespace)
	}
	if wait > 0 {
		return false, min(wait, poll), "", nil
	}
	return true, 0, fmt.Sprintf("cluster %s unavailable for %s since the ManifestWork's deletion", strings.Join(clusters, ", "), r.OfflineRelease), nil
}

func (r *Reconciler) reconcileNormal(ctx context.Context, app *unstructured.Unstructured, key string) (ctrl.Result, error) {
	refusal, policy, err := r.check(ctx, app)
	if err != nil {
		return ctrl.Result{}, err
	}
	name := pullmodel.WorkName(app.GetName(), string(app.GetUID()))
	cluster := pullmodel.TargetCluster(app)
	if refusal == nil {
		var have *workv1.ManifestWork
		w := &workv1.ManifestWork{}
		switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: name}, w, client.UnsafeDisableDeepCopy); {
		case err == nil:
			have = w
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, err
		}
		project, err := r.deliveredProject(ctx, app)
		if err != nil {
			return ctrl.Result{}, err
		}
		var projectCopy *unstructured.Unstructured
		if project != nil {
			var wait bool
			projectCopy, wait, refusal, err = r.projectFor(ctx, app, have, project, SpokePlace(policy, app).Namespace)
			if err != nil {
				return ctrl.Result{}, err
			}
			if wait && refusal == nil {
				// The events of the project's ManifestWork wake it. Until then the Application
				// says what it waits for, in place of whatever an earlier pass said.
				log.FromContext(ctx).V(1).Info("waiting for the AppProject on the cluster", "cluster", cluster, "project", project.GetName())
				return ctrl.Result{}, r.setCondition(ctx, app, &Refusal{ReasonWaitingForProject, fmt.Sprintf("AppProject %q is not applied on cluster %s yet (ManifestWork %s/%s); the Application is delivered once OCM's work agent there reports it applied", project.GetName(), cluster, cluster, ProjectWorkName(project.GetName()))})
			}
		}
		if refusal == nil {
			if refusal, err = r.deliver(ctx, app, have, policy, projectCopy); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	// Bad input or a lost right leaves an earlier ManifestWork as it is: a typo must not tear
	// a workload down. One written before seals existed is sealed over what the Application
	// says (sealLegacy), so that it is still known as this Application's once it is gone.
	if refusal != nil {
		if err := r.sealLegacy(ctx, app, cluster, name); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.dropProject(ctx, app, cluster, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if refusal == nil {
		if _, err := r.deleteWorksOf(ctx, app, &types.NamespacedName{Namespace: cluster, Name: name}); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.setCondition(ctx, app, refusal)
}

// deliver writes the Application's ManifestWork (have, nil when there is none yet) when it
// differs from what the Application asks for, or returns why it cannot.
func (r *Reconciler) deliver(ctx context.Context, app *unstructured.Unstructured, have *workv1.ManifestWork, policy Policy, projectCopy *unstructured.Unstructured) (*Refusal, error) {
	cluster, name := pullmodel.TargetCluster(app), pullmodel.WorkName(app.GetName(), string(app.GetUID()))
	want, err := Build(Input{App: app, OperationRequest: operationRequest(app, have), RefreshBaseline: refreshBaseline(app, have, r.Now()), Spoke: SpokePlace(policy, app), ProjectCopy: projectCopy})
	var tooLarge *TooLargeError
	var refusal *Refusal
	switch {
	case have != nil && !ownedFor(r.Sealer, have, app):
		// Another Application's ManifestWork has this name (names carry five characters of
		// the UID): never write over it.
		refusal = &Refusal{ReasonWorkNameTaken, fmt.Sprintf("ManifestWork %s/%s exists and belongs to another Application (%s); re-create this Application to get another UID", cluster, name, pullmodel.WorkAppKey(have))}
	case errors.As(err, &tooLarge):
		refusal = &Refusal{ReasonTooLarge, err.Error() + "; split it (for example into an ApplicationSet) or shrink inline values"}
	case err != nil:
		refusal = &Refusal{ReasonInvalid, err.Error()}
	default:
		if refusal, err = r.checkSpokePlace(ctx, app, have, want); err != nil {
			return nil, err
		}
	}
	if refusal != nil {
		return refusal, nil
	}
	want.Annotations[seal.Annotation] = r.Sealer.Sign(SealFields(want))
	wrote, err := r.apply(ctx, have, want)
	if wrote {
		countDelivered()
	}
	return nil, err
}

// ReasonProjectNotApplied refuses a new Application whose AppProject the cluster's work agent
// could not apply.
const ReasonProjectNotApplied = "ProjectNotApplied"

// ReasonWaitingForProject holds back a new Application, or one moved to another AppProject,
// until the cluster's work agent has applied the project: not a refusal, a wait of one round
// trip of the work agent (or of the cluster's outage).
const ReasonWaitingForProject = "WaitingForProject"

// projectFor relates an authorized Application's delivery to the ManifestWork of its hub
// AppProject on its cluster (project.go). Once the work agent has applied the project there,
// the Application goes on its own. Until then, an Application delivered before goes on too (its
// project is on the cluster already), keeping the copy of the project its ManifestWork carries
// from before projects had ManifestWorks of their own (projectCopy), so that some ManifestWork
// applies the project at all times; a new one, or one that changes project, waits (wait), so
// that the cluster's Argo CD never sees it before its project: Argo CD looks at an Application
// whose project was missing again only at its next periodic refresh, and fails a sync it was
// asked for meanwhile.
func (r *Reconciler) projectFor(ctx context.Context, app *unstructured.Unstructured, have *workv1.ManifestWork, project *unstructured.Unstructured, spokeNamespace string) (projectCopy *unstructured.Unstructured, wait bool, refusal *Refusal, err error) {
	cluster, name := pullmodel.TargetCluster(app), project.GetName()
	var tooLarge *TooLargeError
	if _, err := BuildProjectWork(cluster, spokeNamespace, project); errors.As(err, &tooLarge) {
		return nil, true, &Refusal{ReasonTooLarge, err.Error() + "; shrink it"}, nil
	} else if err != nil {
		return nil, true, nil, err
	}
	pw := &workv1.ManifestWork{}
	found, owned, ready, failure := false, false, false, ""
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: ProjectWorkName(name)}, pw, client.UnsafeDisableDeepCopy); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, true, nil, err
	default:
		found, owned = true, OwnedProjectWork(r.Sealer, pw)
		if owned {
			ready = ProjectApplied(pw, spokeNamespace)
			failure, _, _ = ProjectApplyFailure(pw)
		}
	}
	switch {
	case ready:
		return nil, false, nil, nil
	case have != nil && carriesProjectCopy(have, name):
		return project, false, nil, nil
	case have != nil && payloadProject(have) == name:
		return nil, false, nil, nil
	case found && !owned:
		return nil, true, &Refusal{ReasonWorkNameTaken, fmt.Sprintf("ManifestWork %s/%s, which carries AppProject %q to the cluster, exists and is not the pull model's; a hub admin removes it and the Application is delivered", cluster, pw.Name, name)}, nil
	case failure != "":
		return nil, true, &Refusal{ReasonProjectNotApplied, fmt.Sprintf("OCM's work agent on cluster %s could not apply AppProject %q (ManifestWork %s): %s; the Application is delivered once it has", cluster, name, pw.Name, failure)}, nil
	}
	return nil, true, nil, nil
}

// checkSpokePlace refuses a delivery that would move an Application already on the cluster to
// another place there, or that would land where another Application's delivery is.
func (r *Reconciler) checkSpokePlace(ctx context.Context, app *unstructured.Unstructured, have, want *workv1.ManifestWork) (*Refusal, error) {
	cluster := want.Namespace
	to := pullmodel.SpokeApplicationOf(want)
	if have != nil {
		// Moving it would make the work agent delete the Application at its old place, and
		// with it, through its resources finalizer, the workload the new one re-creates.
		if from := pullmodel.SpokeApplicationOf(have); from != to {
			return &Refusal{ReasonSpokePlaceChanged, fmt.Sprintf("the Application was delivered to %s on the cluster and would now go to %s (the cluster's Argo CD namespace, label %s, changed, or Applications outside the hub Argo CD namespace are named <namespace>.<name> there); moving it would delete the old one and its workload. The old one stays as it was; to move it, delete this Application and create it again (its workload is then deleted and re-created), or remove the resources finalizer from %s on the cluster first", from, to, LabelSpokeNamespace, from)}, nil
		}
	}
	list := &workv1.ManifestWorkList{}
	if err := pullmodel.ListWorksDelivering(ctx, r.Cache, list, cluster, to, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	key := pullmodel.AppKey(app.GetNamespace(), app.GetName())
	for i := range list.Items {
		w := &list.Items[i]
		if w.Name != want.Name && pullmodel.WorkAppKey(w) != key && Owned(r.Sealer, w) {
			return &Refusal{ReasonSpokeNameTaken, fmt.Sprintf("Application %s of the cluster is delivered already, from %s (ManifestWork %s); rename this Application", to, pullmodel.WorkAppKey(w), w.Name)}, nil
		}
	}
	return nil, nil
}

// sealLegacy seals the ManifestWork of an Application that was delivered before seals
// existed. The seal covers what this manager derives from the Application (appSealFields),
// never what it reads back from the ManifestWork, whose annotations a work agent may edit: a
// seal over them would vouch for that edit, for example an ApplicationSet of another namespace
// whose report would then list the ManifestWork. A ManifestWork that carries a seal which does
// not verify (edited, or sealed with a key since lost) is left as it is: only a delivery, which
// rewrites every sealed field from the Application, seals it again.
func (r *Reconciler) sealLegacy(ctx context.Context, app *unstructured.Unstructured, cluster, name string) error {
	w := &workv1.ManifestWork{}
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: name}, w, client.UnsafeDisableDeepCopy); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, sealed := w.Annotations[seal.Annotation]; sealed || !ownedFor(r.Sealer, w, app) {
		return nil
	}
	f := appSealFields(app)
	if SealFields(w) != f {
		// Its annotations say something the Application does not: not a legacy delivery as
		// this manager wrote it.
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": w.ResourceVersion,
		"annotations":     map[string]any{seal.Annotation: r.Sealer.Sign(f)},
	}})
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("sealing a ManifestWork delivered before seals existed", "namespace", w.Namespace, "name", w.Name)
	target := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
	return client.IgnoreNotFound(r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)))
}

// appSealFields are the seal's fields of the ManifestWork of app, as Build writes them.
func appSealFields(app *unstructured.Unstructured) seal.Fields {
	f := seal.Fields{
		Namespace: pullmodel.TargetCluster(app), Name: pullmodel.WorkName(app.GetName(), string(app.GetUID())),
		AppNamespace: app.GetNamespace(), AppName: app.GetName(),
	}
	if set := pullmodel.OwningApplicationSet(app); set != "" {
		f.ApplicationSet = app.GetNamespace() + "/" + set
	}
	return f
}

// check runs the admission policies in order and returns the first refusal, and the policy for
// the Application's cluster (its spoke namespace). Everything it reads comes from caches, at
// every pass, so that a right lost later stops the next update.
func (r *Reconciler) check(ctx context.Context, app *unstructured.Unstructured) (*Refusal, Policy, error) {
	if ref := checkSkipReconcile(app); ref != nil {
		return ref, r.Policy, nil
	}
	var f Facts
	mc := &clusterv1.ManagedCluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: pullmodel.TargetCluster(app)}, mc, client.UnsafeDisableDeepCopy); {
	case err == nil:
		f.Cluster = mc
	case !apierrors.IsNotFound(err):
		return nil, r.Policy, err
	}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: app.GetNamespace()}, &clusterv1.ManagedCluster{}, client.UnsafeDisableDeepCopy); {
	case err == nil:
		f.SourceIsCluster = true
	case !apierrors.IsNotFound(err):
		return nil, r.Policy, err
	}
	bindings := &clusterv1beta2.ManagedClusterSetBindingList{}
	if err := r.Cache.List(ctx, bindings, client.InNamespace(app.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		return nil, r.Policy, err
	}
	for i := range bindings.Items {
		b := Binding{Binding: &bindings.Items[i]}
		set := &clusterv1beta2.ManagedClusterSet{}
		switch err := r.Cache.Get(ctx, client.ObjectKey{Name: b.Binding.Spec.ClusterSet}, set, client.UnsafeDisableDeepCopy); {
		case err == nil:
			b.Set = set
		case !apierrors.IsNotFound(err):
			return nil, r.Policy, err
		}
		f.Bindings = append(f.Bindings, b)
	}
	project := NewAppProject()
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: r.Policy.ArgoCDNamespace, Name: pullmodel.ProjectOf(app)}, project, client.UnsafeDisableDeepCopy); {
	case err == nil:
		f.Project = project
	case !apierrors.IsNotFound(err):
		return nil, r.Policy, err
	}
	// A bad label is refused by Authorize; the default then stands for what is not delivered.
	policy, _ := r.Policy.ForCluster(f.Cluster)
	return Authorize(r.Policy, app, f), policy, nil
}

// dropProject takes the AppProject out of a refused Application's earlier ManifestWork. The
// Application stays as it was delivered, but the project copy in it would go stale (a refusal
// may be the project's own change) while the work agent keeps applying it, over the current
// copy another Application's ManifestWork carries. The copy on the cluster stays (it is
// orphaned); the Application's own manifest is untouched.
func (r *Reconciler) dropProject(ctx context.Context, app *unstructured.Unstructured, cluster, name string) error {
	w := &workv1.ManifestWork{}
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: name}, w, client.UnsafeDisableDeepCopy); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ownedFor(r.Sealer, w, app) || w.DeletionTimestamp != nil || len(w.Spec.Workload.Manifests) < 2 {
		return nil
	}
	upd := w.DeepCopy()
	upd.Spec.Workload.Manifests = upd.Spec.Workload.Manifests[:1]
	upd.Spec.ManifestConfigs = slices.DeleteFunc(upd.Spec.ManifestConfigs, func(c workv1.ManifestConfigOption) bool {
		return c.ResourceIdentifier.Resource == "appprojects"
	})
	upd.Spec.DeleteOption = nil
	log.FromContext(ctx).Info("taking the AppProject out of a refused Application's ManifestWork", "namespace", w.Namespace, "name", w.Name)
	return r.Client.Update(ctx, upd)
}

// deliveredProject is the hub AppProject to deliver with the Application: the one it names, in
// the hub Argo CD namespace (the checks have found it there), unless that is "default", which
// every Argo CD install has (argocd-server makes it; so does the Argo CD components addon) and
// whose delivery would overwrite the cluster's own.
func (r *Reconciler) deliveredProject(ctx context.Context, app *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := pullmodel.ProjectOf(app)
	if name == pullmodel.DefaultProject {
		return nil, nil
	}
	project := NewAppProject()
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: r.Policy.ArgoCDNamespace, Name: name}, project, client.UnsafeDisableDeepCopy); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return project, nil
}

// apply creates the ManifestWork or updates it when it differs; nothing is written otherwise.
// wrote reports a write the API server took.
func (r *Reconciler) apply(ctx context.Context, have, want *workv1.ManifestWork) (wrote bool, err error) {
	if have == nil {
		log.FromContext(ctx).Info("creating ManifestWork", "namespace", want.Namespace, "name", want.Name)
		err := r.Client.Create(ctx, want)
		return err == nil, err
	}
	if !NeedsUpdate(have, want) {
		return false, nil
	}
	labels, annotations := maps.Clone(have.Labels), maps.Clone(have.Annotations)
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	delete(labels, pullmodel.LabelApplicationSet)
	delete(annotations, pullmodel.AnnotationApplicationSet)
	delete(annotations, pullmodel.AnnotationOperationRequest)
	delete(annotations, pullmodel.AnnotationOperationBaseline)
	delete(annotations, pullmodel.AnnotationRefreshBaseline)
	maps.Copy(labels, want.Labels)
	maps.Copy(annotations, want.Annotations)
	patch, err := replaceSpec(have.ResourceVersion, labels, annotations, want.Spec)
	if err != nil {
		return false, err
	}
	log.FromContext(ctx).Info("updating ManifestWork", "namespace", have.Namespace, "name", have.Name)
	err = r.Client.Patch(ctx, metadataOf(have), patch)
	return err == nil, err
}

// replaceSpec is the update of a ManifestWork's labels, annotations and spec, at
// resourceVersion, as a JSON patch: sent to metadataOf the ManifestWork, the API server answers
// with its metadata only, where an update's answer is the whole ManifestWork, status included,
// decoded into an object nobody reads (most of what a delivery allocated). A patch that sets
// the resourceVersion the ManifestWork no longer has is refused with a conflict, as an update.
func replaceSpec(resourceVersion string, labels, annotations map[string]string, spec workv1.ManifestWorkSpec) (client.Patch, error) {
	ops := []map[string]any{
		{"op": "replace", "path": "/metadata/resourceVersion", "value": resourceVersion},
		{"op": "add", "path": "/metadata/labels", "value": labels},
		{"op": "add", "path": "/metadata/annotations", "value": annotations},
		{"op": "add", "path": "/spec", "value": spec},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// metadataOf is a ManifestWork's name as a target whose writes are answered with its metadata.
func metadataOf(w *workv1.ManifestWork) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name},
	}
}

// deleteWorks deletes the ManifestWorks the pull model made from the Application key, except
// keep, and returns how many of them still exist (deleted ones linger until the work agent has
// removed what they applied). Only sealed ManifestWorks count: a work agent's labels and
// annotations on a ManifestWork it did not get from the pull model never make it one to delete.
func (r *Reconciler) deleteWorks(ctx context.Context, key string, keep *types.NamespacedName) (int, error) {
	return r.deleteWorksMatching(ctx, key, keep, func(w *workv1.ManifestWork) bool { return Owned(r.Sealer, w) })
}

// deleteWorksOf is deleteWorks for an Application still on the hub, whose own ManifestWork
// also counts when it was written before seals existed.
func (r *Reconciler) deleteWorksOf(ctx context.Context, app *unstructured.Unstructured, keep *types.NamespacedName) (int, error) {
	return r.deleteWorksMatching(ctx, pullmodel.AppKey(app.GetNamespace(), app.GetName()), keep, func(w *workv1.ManifestWork) bool { return ownedFor(r.Sealer, w, app) })
}

func (r *Reconciler) deleteWorksMatching(ctx context.Context, key string, keep *types.NamespacedName, ours func(*workv1.ManifestWork) bool) (int, error) {
	list := &workv1.ManifestWorkList{}
	if err := pullmodel.ListWorksOfApp(ctx, r.Cache, list, key, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	left := 0
	for i := range list.Items {
		w := &list.Items[i]
		if (keep != nil && w.Namespace == keep.Namespace && w.Name == keep.Name) || !ours(w) {
			continue
		}
		left++
		if w.DeletionTimestamp != nil {
			continue
		}
		log.FromContext(ctx).Info("deleting ManifestWork", "namespace", w.Namespace, "name", w.Name)
		if err := r.Client.Delete(ctx, w, client.Preconditions{UID: &w.UID}); client.IgnoreNotFound(err) != nil {
			return left, err
		}
	}
	return left, nil
}

// patchApplication applies a merge patch to the Application app names; the answer is decoded
// into an object of its own, since app may be the cache's.
func (r *Reconciler) patchApplication(ctx context.Context, app *unstructured.Unstructured, patch []byte) error {
	target := pullmodel.NewApplication()
	target.SetNamespace(app.GetNamespace())
	target.SetName(app.GetName())
	return r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch))
}

// setCondition sets or clears the delivery condition, with an Event when it appears or
// changes, and counts a refusal then; nothing is written when it is already as it should be.
func (r *Reconciler) setCondition(ctx context.Context, app *unstructured.Unstructured, refusal *Refusal) error {
	msg := ""
	if refusal != nil {
		msg = refusal.String()
	}
	have, ok := pullmodel.DeliveryCondition(app)
	if (msg == "" && !ok) || (ok && have == msg) {
		return nil
	}
	conds := pullmodel.WithDeliveryCondition(app, msg, r.Now())
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": app.GetResourceVersion()},
		"status":   map[string]any{"conditions": conds},
	})
	if err != nil {
		return err
	}
	if err := r.patchApplication(ctx, app, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	if refusal != nil {
		countRefused(refusal.Reason)
	}
	switch {
	case refusal != nil && refusal.Reason == ReasonWaitingForProject:
		r.Recorder.Eventf(app, nil, corev1.EventTypeNormal, refusal.Reason, "Deliver", "%s", refusal.Message)
	case refusal != nil:
		r.Recorder.Eventf(app, nil, corev1.EventTypeWarning, refusal.Reason, "Deliver", "%s", refusal.Message)
	default:
		r.Recorder.Eventf(app, nil, corev1.EventTypeNormal, "Delivered", "Deliver", "delivered to cluster %s", pullmodel.TargetCluster(app))
	}
	return nil
}

// operationRequest names the Application's current sync request: the name it was first sent
// under, kept while the ManifestWork carries the same request, else the Application's
// resourceVersion now, which no earlier request of it had (each request, and each status write
// that shows a run, is a write of the Application). The same request is a new one once the
// spoke has run the one sent and the hub shows it (the clear and the new request may follow
// each other too closely for this controller to ever see the Application without one).
func operationRequest(app *unstructured.Unstructured, have *workv1.ManifestWork) string {
	op, ok := app.Object["operation"].(map[string]any)
	if !ok {
		return ""
	}
	if have != nil {
		fb := FeedbackValues(have)
		sentAs := have.Annotations[pullmodel.AnnotationOperationRequest]
		if sent := Operation(have); sentAs != "" && SameOperation(sent, op) && !(OperationRun(have, fb) && OperationShown(app, fb)) {
			return sentAs
		}
	}
	return app.GetResourceVersion()
}

// refreshBaseline is when the Application's current refresh request was first sent: kept while
// the ManifestWork carries the same request, else now. A reconcile the spoke reports after it
// served the request (RefreshServed). The spoke's reconcile time is not fed back while no
// request is outstanding, so there is no "last reconcile" to compare with; the comparison of a
// spoke time with a hub time is the one Argo CD's progressive sync already makes.
func refreshBaseline(app *unstructured.Unstructured, have *workv1.ManifestWork, now time.Time) string {
	want, ok := pullmodel.LookupAnnotation(app, pullmodel.AnnotationRefresh)
	if !ok {
		return ""
	}
	if have != nil {
		if sent, ok := Refresh(have); ok && sent == want {
			return have.Annotations[pullmodel.AnnotationRefreshBaseline]
		}
	}
	return now.UTC().Format(time.RFC3339)
}

// RefreshServed reports whether the spoke has reconciled since the refresh request w carries was
// first sent: its fed-back reconcile time is later than the baseline. Both have whole seconds; a
// reconcile within the second of the request does not count, and the next one (the request
// stays in the payload until then) does.
func RefreshServed(w *workv1.ManifestWork, fb map[string]string) bool {
	at, err := time.Parse(time.RFC3339, fb[FeedbackReconciledAt])
	if err != nil {
		return false
	}
	since, err := time.Parse(time.RFC3339, w.Annotations[pullmodel.AnnotationRefreshBaseline])
	if err != nil {
		// No usable baseline (a ManifestWork written by hand): any reconcile serves it.
		return true
	}
	return at.After(since)
}

// applicationFeedback is what the work agent fed back for the ManifestWork's Application.
func applicationFeedback(w *workv1.ManifestWork) []workv1.FeedbackValue {
	var out []workv1.FeedbackValue
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Group == pullmodel.ArgoGroupVersion.Group && m.ResourceMeta.Resource == "applications" {
			out = append(out, m.StatusFeedbacks.Values...)
		}
	}
	return out
}

// FeedbackValues returns the spoke Application's fed-back fields by feedback name.
func FeedbackValues(w *workv1.ManifestWork) map[string]string {
	out := map[string]string{}
	for _, v := range applicationFeedback(w) {
		switch {
		case v.Value.String != nil:
			out[v.Name] = *v.Value.String
		case v.Value.Integer != nil:
			out[v.Name] = fmt.Sprint(*v.Value.Integer)
		case v.Value.Boolean != nil:
			out[v.Name] = fmt.Sprint(*v.Value.Boolean)
		}
	}
	return out
}

// FeedbackLists returns the spoke Application's fed-back list fields by feedback name, and
// whether each is whole: a work agent with the RawFeedbackJsonString gate reports a list of two
// or more items as JSON (whole); otherwise a value is its first item only, and a one-item list
// cannot be told from it (not whole).
func FeedbackLists(w *workv1.ManifestWork) (map[string][]string, map[string]bool) {
	lists, whole := map[string][]string{}, map[string]bool{}
	for _, v := range applicationFeedback(w) {
		switch {
		case v.Value.String != nil:
			lists[v.Name] = []string{*v.Value.String}
		case v.Value.JsonRaw != nil:
			var items []string
			if json.Unmarshal([]byte(*v.Value.JsonRaw), &items) == nil {
				lists[v.Name], whole[v.Name] = items, true
			}
		}
	}
	return lists, whole
}

// forCluster wakes the Applications that target a cluster and those in the hub namespace named
// after it.
func (r *Reconciler) forCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return append(r.apps(ctx, client.MatchingFields{pullmodel.IndexAppByCluster: o.GetName()}), r.apps(ctx, client.InNamespace(o.GetName()))...)
}

// forNamespace wakes the Applications of a binding's namespace.
func (r *Reconciler) forNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.apps(ctx, client.InNamespace(o.GetNamespace()))
}

// forClusterSet wakes the Applications of every namespace bound to the set.
func (r *Reconciler) forClusterSet(ctx context.Context, o client.Object) []reconcile.Request {
	bindings := &clusterv1beta2.ManagedClusterSetBindingList{}
	if err := r.Cache.List(ctx, bindings); err != nil {
		log.FromContext(ctx).Error(err, "listing ManagedClusterSetBindings")
		return nil
	}
	var out []reconcile.Request
	seen := map[string]bool{}
	for _, b := range bindings.Items {
		if b.Spec.ClusterSet == o.GetName() && !seen[b.Namespace] {
			seen[b.Namespace] = true
			out = append(out, r.apps(ctx, client.InNamespace(b.Namespace))...)
		}
	}
	return out
}

// forProject wakes the Applications that name a hub AppProject.
func (r *Reconciler) forProject(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.Policy.ArgoCDNamespace {
		return nil
	}
	return r.apps(ctx, client.MatchingFields{pullmodel.IndexAppByProject: o.GetName()})
}

// apps names the Applications opts select. Only their names are read, so the cache's objects are
// not copied: a project or binding that every Application shares wakes them all.
func (r *Reconciler) apps(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := pullmodel.NewApplicationList()
	if err := r.Cache.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		log.FromContext(ctx).Error(err, "listing Applications to wake")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, app := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: app.GetNamespace(), Name: app.GetName()}})
	}
	return out
}

// NewAppProject returns an empty unstructured AppProject.
func NewAppProject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(pullmodel.AppProjectGVK)
	return u
}

// deliveryInputChanged passes Application events that can change the ManifestWork or the
// delivery decision. Of the status the status controller writes back, only what decides the
// post-sync reconcile rule counts (reconcileAfterSyncPending: the finished operation against
// the last reconcile): its answer flips when a sync finishes and when the spoke's reconcile
// after it arrives, and the rule must follow both, or it is never added, or never removed and
// every periodic refresh costs writes. Other status changes (health, sync, conditions, a
// reconcile time that changes nothing) do not wake this controller.
func deliveryInputChanged() predicate.Predicate { return applicationInputChanged(true) }

// applicationInputChanged passes Application updates that change what the pull model reads of
// it: spec, operation, labels, annotations, finalizers, owners, deletion, and, with
// postSyncRule, the status that decides the post-sync reconcile rule.
func applicationInputChanged(postSyncRule bool) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*unstructured.Unstructured)
		n, okNew := e.ObjectNew.(*unstructured.Unstructured)
		if !okOld || !okNew {
			return true
		}
		for _, f := range []string{"spec", "operation"} {
			if !equality.Semantic.DeepEqual(o.Object[f], n.Object[f]) {
				return true
			}
		}
		return (postSyncRule && reconcileAfterSyncPending(o) != reconcileAfterSyncPending(n)) ||
			!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
			!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
			(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
	}}
}

func deleted() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// clusterAuthorizationChanged passes ManagedCluster changes that can change a delivery
// decision: acceptance, the set label, and the cluster's spoke namespace label.
func clusterAuthorizationChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*clusterv1.ManagedCluster)
		n, ok2 := e.ObjectNew.(*clusterv1.ManagedCluster)
		return !ok1 || !ok2 || o.Spec.HubAcceptsClient != n.Spec.HubAcceptsClient ||
			o.Labels[clusterv1beta2.ClusterSetLabel] != n.Labels[clusterv1beta2.ClusterSetLabel] ||
			!sameLabel(o.Labels, n.Labels, LabelSpokeNamespace)
	}}
}

// sameLabel reports whether key is equally set (or equally absent) in both.
func sameLabel(a, b map[string]string, key string) bool {
	va, oka := a[key]
	vb, okb := b[key]
	return oka == okb && va == vb
}
