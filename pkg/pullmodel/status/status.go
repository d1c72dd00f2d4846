// Package status writes what the spoke's Argo CD reports, fed back through the
// ManifestWork, onto the hub Application, and clears the hub's sync request once the spoke
// has run it.
package status

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
)

// Reconciler mirrors ManifestWork feedback onto hub Applications, keyed by Application.
type Reconciler struct {
	// Client writes; Cache is the pull model's own cache, which it watches and reads.
	Client      client.Client
	Cache       cache.Cache
	Concurrency int
	// Sealer tells the ManifestWorks of the AppProjects the pull model wrote, whose failures
	// the Applications naming them show, from others.
	Sealer *seal.Sealer
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Concurrency < 1 {
		r.Concurrency = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pullmodel-status").
		// The Application's own changes matter when they touch what this controller writes
		// (someone else wrote status) or the sync request it clears.
		WatchesRawSource(source.Kind[client.Object](r.Cache, pullmodel.NewApplication(), &handler.EnqueueRequestForObject{}, statusInputChanged())).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(pullmodel.ForWork), feedbackChanged())).
		// The work agent could, or could no longer, apply an AppProject: every Application of
		// the cluster naming it says so.
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, handler.EnqueueRequestsFromMapFunc(r.appsOfProjectWork), projectFailureChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Concurrency}).
		Complete(r)
}

// Reconcile writes the hub Application's status from its ManifestWork's feedback, in one
// patch, and only when something differs.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The Application and its ManifestWorks are read from the cache without copies, read only:
	// this runs at each feedback change of every Application, and the copies (each as large as
	// the object decoded, without the cache's sharing) were most of what it allocated.
	app := pullmodel.NewApplication()
	if err := r.Cache.Get(ctx, req.NamespacedName, app, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pullmodel.Marked(app) || app.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, nil
	}
	w := &workv1.ManifestWork{}
	key := client.ObjectKey{Namespace: pullmodel.TargetCluster(app), Name: pullmodel.WorkName(app.GetName(), string(app.GetUID()))}
	if err := r.Cache.Get(ctx, key, w, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pullmodel.WorkAppKey(w) != pullmodel.AppKey(app.GetNamespace(), app.GetName()) {
		// Another Application's ManifestWork under this name (see propagation's WorkNameTaken).
		return ctrl.Result{}, nil
	}
	patch := PatchWithProject(app, w, r.projectWork(ctx, app))
	if patch == nil {
		return ctrl.Result{}, nil
	}
	md, _ := patch["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["resourceVersion"] = app.GetResourceVersion()
	patch["metadata"] = md
	data, err := json.Marshal(patch)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A conflict (the Application changed since the cache saw it) is retried with backoff. The
	// answer is decoded into an object of its own, never into the cache's, and is its metadata
	// only: nothing reads it, and the whole Application decoded was a third of what a write
	// allocated.
	target := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: app.GetNamespace(), Name: app.GetName()}}
	target.SetGroupVersionKind(pullmodel.ArgoGroupVersion.WithKind("Application"))
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, data)))
}

// projectWork is the ManifestWork the pull model wrote that carries the Application's
// AppProject to its cluster, or nil.
func (r *Reconciler) projectWork(ctx context.Context, app *unstructured.Unstructured) *workv1.ManifestWork {
	name := pullmodel.ProjectOf(app)
	if name == pullmodel.DefaultProject {
		return nil
	}
	pw := &workv1.ManifestWork{}
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: pullmodel.TargetCluster(app), Name: propagation.ProjectWorkName(name)}, pw, client.UnsafeDisableDeepCopy); err != nil || !propagation.OwnedProjectWork(r.Sealer, pw) {
		return nil
	}
	return pw
}

// appsOfProjectWork maps a project ManifestWork to the Applications of its cluster that name
// its AppProject.
func (r *Reconciler) appsOfProjectWork(ctx context.Context, o client.Object) []reconcile.Request {
	p := pullmodel.Annotation(o, pullmodel.AnnotationHubProject)
	if !pullmodel.IsTrue(pullmodel.Label(o, pullmodel.LabelProjectWork)) || p == "" {
		return nil
	}
	list := pullmodel.NewApplicationList()
	if err := r.Cache.List(ctx, list, client.MatchingFields{pullmodel.IndexAppByClusterProject: pullmodel.ClusterProjectKey(o.GetNamespace(), p)}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, a := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.GetNamespace(), Name: a.GetName()}})
	}
	return out
}

// Patch is PatchWithProject without the AppProject's ManifestWork.
func Patch(app *unstructured.Unstructured, w *workv1.ManifestWork) map[string]any {
	return PatchWithProject(app, w, nil)
}

// PatchWithProject returns the JSON merge patch that brings the hub Application's status in line with
// the ManifestWork's feedback and clears a sync request the spoke has run, or nil when
// nothing differs.
//
// ApplicationSet progressive sync (RollingSync) moves an Application from Pending to
// Progressing when status.operationState.startedAt is later than its own transition and
// status.reconciledAt is unset or later too, and from Progressing to Healthy when health is
// Healthy and sync Synced; both times come back as the spoke wrote them, so each change is one
// write and no intermediate health has to be invented. Its times have whole seconds: a spoke
// operation that starts within the second of the Pending transition does not count, and the
// ApplicationSet asks again once the request is cleared; clearing it (only once the operation
// has finished, see propagation.OperationRun) is what lets that second request through.
//
// project, when not nil, is the ManifestWork that carries the Application's AppProject to the
// cluster: the work agent's failure to apply it is the Application's too.
//
// The patch may share values with app: it is for encoding, not for changing.
func PatchWithProject(app *unstructured.Unstructured, w, project *workv1.ManifestWork) map[string]any {
	fb := propagation.FeedbackValues(w)
	lists, whole := propagation.FeedbackLists(w)
	clear := clearOperation(app, w, fb)
	out := map[string]any{}
	want := map[string]any{}
	if fb[propagation.FeedbackHealth] != "" || fb[propagation.FeedbackSync] != "" {
		if v := fb[propagation.FeedbackSync]; v != "" {
			// A multi-source Application's revisions, when they come back whole; else none,
			// rather than a partial list progressive sync would pin its syncs to.
			sync := map[string]any{"status": v, "revision": orNull(fb[propagation.FeedbackRevision]), "revisions": nil}
			if whole[propagation.FeedbackSyncRevisions] {
				revs := make([]any, 0, len(lists[propagation.FeedbackSyncRevisions]))
				for _, r := range lists[propagation.FeedbackSyncRevisions] {
					revs = append(revs, r)
				}
				sync["revisions"] = revs
			}
			want["sync"] = sync
		}
		if v := fb[propagation.FeedbackHealth]; v != "" {
			want["health"] = map[string]any{"status": v, "message": orNull(truncate(fb[propagation.FeedbackHealthMessage]))}
		}
		// Only while the ManifestWork asks for it (a request outstanding, or the reconcile after
		// a finished sync; see propagation's feedbackPaths): a periodic refresh must cost the
		// hub nothing.
		if v := fb[propagation.FeedbackReconciledAt]; v != "" && propagation.FeedsBackReconcileTime(w) {
			want["reconciledAt"] = v
		}
		if phase, started := fb[propagation.FeedbackOperationPhase], fb[propagation.FeedbackOperationStarted]; phase != "" && started != "" {
			// A field the spoke no longer reports is removed (null in a merge patch).
			op := map[string]any{"phase": phase, "startedAt": started, "finishedAt": orNull(fb[propagation.FeedbackOperationEnded]), "message": orNull(truncate(fb[propagation.FeedbackOperationMessage]))}
			// Required by the CRD: the request this operation runs, named, when it is the
			// ManifestWork's, else what was recorded before.
			// Read in place: the patch is only encoded.
			shown, _, _ := unstructured.NestedFieldNoCopy(app.Object, "status", "operationState", "operation")
			have, _ := shown.(map[string]any)
			if propagation.RunsSentRequest(w, fb) {
				if sent := propagation.OperationAsSent(w); sent != nil {
					have = sent
				}
			}
			if have == nil {
				have = map[string]any{}
			}
			op["operation"] = have
			want["operationState"] = op
		}
	}
	status := map[string]any{}
	current, _ := app.Object["status"].(map[string]any)
	for k, v := range want {
		if have, ok := current[k]; !ok || !subset(v, have) {
			status[k] = v
		}
	}
	if conds, changed := conditions(app, w, project, fb, lists); changed {
		status["conditions"] = conds
	}
	if res, changed := resources(app, fb); changed {
		status["resources"] = res
	}
	if len(status) > 0 {
		out["status"] = status
	}
	if clear {
		out["operation"] = nil
	}
	if clearRefresh(app, w, fb) {
		out["metadata"] = map[string]any{"annotations": map[string]any{pullmodel.AnnotationRefresh: nil}}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// maxConditions bounds how many of the spoke's conditions the hub Application shows.
const maxConditions = 8

// MaxMessageBytes bounds each message written onto the hub Application (conditions, health,
// operation): Argo CD's comparison errors can quote whole manifests, and the hub Application is
// one etcd object.
const MaxMessageBytes = 1024

func truncate(s string) string { return pullmodel.Truncate(s, MaxMessageBytes) }

// conditions returns the hub Application's conditions as the cluster reports them, and whether
// they differ from what it shows: the spoke Application's conditions (as fed back), then, when
// OCM's work agent could not apply the Application (forbidden, missing CRD or namespace), a
// pullmodel.ConditionApplyError saying so. The hub's own delivery condition, which the
// propagation controller writes, is kept as it is.
func conditions(app *unstructured.Unstructured, w, project *workv1.ManifestWork, fb map[string]string, lists map[string][]string) ([]any, bool) {
	var delivery, mine []any
	// Read in place, as the patch that may carry them is only encoded.
	shown, _, _ := unstructured.NestedFieldNoCopy(app.Object, "status", "conditions")
	have, _ := shown.([]any)
	for _, c := range have {
		if m, _ := c.(map[string]any); m["type"] == pullmodel.ConditionDeliveryError {
			delivery = append(delivery, c)
		} else {
			mine = append(mine, c)
		}
	}
	// The error conditions fed back by type first: they are whole whatever comes before them,
	// and the bound never drops one for a warning.
	var want []any
	byType := map[string]bool{}
	for _, t := range propagation.ErrorConditionTypes {
		msg, ok := fb[propagation.FeedbackErrorMessage(t)]
		if !ok {
			continue
		}
		c := map[string]any{"type": t, "message": truncate(msg)}
		if at := fb[propagation.FeedbackErrorTime(t)]; at != "" {
			c["lastTransitionTime"] = at
		}
		want = append(want, c)
		byType[t] = true
	}
	types, messages, times := lists[propagation.FeedbackConditionTypes], lists[propagation.FeedbackConditionMessages], lists[propagation.FeedbackConditionTimes]
	for i, t := range types {
		if len(want) >= maxConditions {
			break
		}
		if byType[t] {
			continue
		}
		c := map[string]any{"type": t, "message": ""}
		// Argo CD requires a message; a transition time is optional, so times pair with
		// types only when every condition has one.
		if len(messages) == len(types) {
			c["message"] = truncate(messages[i])
		}
		if len(times) == len(types) {
			c["lastTransitionTime"] = times[i]
		}
		want = append(want, c)
	}
	// In Argo CD's order (by type), as the spoke shows them.
	slices.SortStableFunc(want, func(a, b any) int {
		return strings.Compare(a.(map[string]any)["type"].(string), b.(map[string]any)["type"].(string))
	})
	if msg, at, failed := applyFailure(w, project); failed {
		want = append(want, map[string]any{
			"type":               pullmodel.ConditionApplyError,
			"message":            truncate("OCM's work agent on cluster " + w.Namespace + " could not apply " + msg),
			"lastTransitionTime": at,
		})
	}
	if len(want) == 0 && len(mine) == 0 || sameJSON(want, mine) {
		return nil, false
	}
	return append(delivery, want...), true
}

// MaxResourcesBytes bounds the JSON of the hub Application's status.resources, as the
// ApplicationSet report bounds its resource list (report.ResourceBudget): the list comes from
// the cluster, and the hub Application is one etcd object.
const MaxResourcesBytes = 64 * 1024

// resources returns the hub Application's status.resources as the cluster's resource reporter
// lists them (group, version, kind, namespace, name; the spoke's sync and health of each are not
// fed back), within MaxResourcesBytes, and whether that differs from what the hub shows. The
// hub's Argo CD, kept away by skip-reconcile, writes no list of its own; without a reporter on
// the cluster, or with a list that does not decode, the hub shows none.
func resources(app *unstructured.Unstructured, fb map[string]string) (any, bool) {
	listed, _, err := resourcelist.Decode(fb[propagation.FeedbackResourceList])
	if err != nil {
		listed = nil
	}
	fit, size := 0, 2
	for _, r := range listed {
		raw, _ := json.Marshal(resourceItem{Group: r.Group, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, Version: r.Version})
		if size+len(raw)+1 > MaxResourcesBytes {
			break
		}
		size += len(raw) + 1
		fit++
	}
	listed = listed[:fit]
	// Read in place and compared item by item: this runs at each feedback change of every
	// Application, and the list is built only when it is to be written.
	shown, _, _ := unstructured.NestedFieldNoCopy(app.Object, "status", "resources")
	have, _ := shown.([]any)
	if len(listed) == 0 {
		return nil, len(have) > 0
	}
	if slices.EqualFunc(have, listed, shows) {
		return nil, false
	}
	want := make([]any, 0, len(listed))
	for _, r := range listed {
		want = append(want, resourceMap(r))
	}
	return want, true
}

// resourceItem is an item of status.resources as resourceMap writes it, for its size: the
// fields in the order a map's keys are encoded.
type resourceItem struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Version   string `json:"version"`
}

// resourceMap is the item of status.resources that names r.
func resourceMap(r resourcelist.Resource) map[string]any {
	item := map[string]any{"version": r.Version, "kind": r.Kind, "name": r.Name}
	if r.Group != "" {
		item["group"] = r.Group
	}
	if r.Namespace != "" {
		item["namespace"] = r.Namespace
	}
	return item
}

// shows reports whether an item of the hub's status.resources is resourceMap(r).
func shows(item any, r resourcelist.Resource) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	keys := 3
	if r.Group != "" {
		keys++
	}
	if r.Namespace != "" {
		keys++
	}
	return len(m) == keys && m["version"] == any(r.Version) && m["kind"] == any(r.Kind) && m["name"] == any(r.Name) &&
		(r.Group == "" || m["group"] == any(r.Group)) && (r.Namespace == "" || m["namespace"] == any(r.Namespace))
}

// sameJSON reports whether a and b encode to the same JSON. Strings, maps and lists, which is
// what a status holds, are compared without encoding them.
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x == y
		}
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			if (x == nil) != (y == nil) || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, found := y[k]; !found || !sameJSON(v, w) {
					return false
				}
			}
			return true
		}
	case []any:
		if y, ok := b.([]any); ok {
			return (x == nil) == (y == nil) && slices.EqualFunc(x, y, sameJSON)
		}
	}
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// applyFailure reports the work agent's failure to apply the ManifestWork's Application, or
// the AppProject it names (in the Application's ManifestWork, as before projects had their own,
// or in project, the project's): a manifest condition Applied=False, with the message and when
// it began.
func applyFailure(w, project *workv1.ManifestWork) (string, string, bool) {
	var msgs []string
	var since string
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Group != pullmodel.ArgoGroupVersion.Group || (m.ResourceMeta.Resource != "applications" && m.ResourceMeta.Resource != "appprojects") {
			continue
		}
		if c := meta.FindStatusCondition(m.Conditions, workv1.ManifestApplied); c != nil && c.Status == metav1.ConditionFalse {
			what := "the Application"
			if m.ResourceMeta.Resource == "appprojects" {
				what = "its AppProject " + m.ResourceMeta.Name
			}
			msgs = append(msgs, what+": "+c.Message)
			if at := c.LastTransitionTime.UTC().Format(time.RFC3339); since == "" || at < since {
				since = at
			}
		}
	}
	if project != nil {
		if msg, at, failed := propagation.ProjectApplyFailure(project); failed {
			msgs = append(msgs, "its AppProject "+project.Annotations[pullmodel.AnnotationHubProject]+": "+msg)
			if since == "" || at < since {
				since = at
			}
		}
	}
	return strings.Join(msgs, "; "), since, len(msgs) > 0
}

// subset reports whether every field of want is in have with the same value (fields only
// have carries, such as the spoke's own extras, do not count as a difference). The merge
// patch then also only sets, never removes, fields within the maps it writes. Values compare
// as JSON: have, read from the API server, carries integers where want, decoded from a
// ManifestWork's payload, carries floats.
func subset(want, have any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return sameJSON(want, have)
	}
	hm, ok := have.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !subset(v, hm[k]) {
			return false
		}
	}
	return true
}

// clearOperation reports whether the hub Application's sync request has been run by the
// spoke: its ManifestWork carries that very request, the spoke has finished an operation it
// started since the request was sent, and the hub does not show that operation yet (once it
// does, an equal request is a new one, which the propagation controller delivers).
func clearOperation(app *unstructured.Unstructured, w *workv1.ManifestWork, fb map[string]string) bool {
	op, ok := app.Object["operation"].(map[string]any)
	if !ok {
		return false
	}
	// The checks that read only annotations and feedback first: the request is decoded from
	// the manifest only once the spoke has finished running one.
	if !propagation.OperationRun(w, fb) || propagation.OperationShown(app, fb) {
		return false
	}
	sent := propagation.Operation(w)
	return sent != nil && propagation.SameOperation(sent, op)
}

// clearRefresh reports whether the hub Application's refresh request has been served: its
// ManifestWork carries that very request and the spoke has reconciled since it was sent.
func clearRefresh(app *unstructured.Unstructured, w *workv1.ManifestWork, fb map[string]string) bool {
	want, ok := pullmodel.LookupAnnotation(app, pullmodel.AnnotationRefresh)
	if !ok {
		return false
	}
	if sent, ok := propagation.Refresh(w); !ok || sent != want {
		return false
	}
	return propagation.RefreshServed(w, fb)
}

// orNull is v, or nil (JSON null) when v is empty.
func orNull(v string) any {
	if v == "" {
		return nil
	}
	return v
}

// feedbackChanged passes ManifestWork events whose feedback or payload changed.
func feedbackChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*workv1.ManifestWork)
			n, ok2 := e.ObjectNew.(*workv1.ManifestWork)
			if !ok1 || !ok2 {
				return true
			}
			if o.Generation != n.Generation || !equality.Semantic.DeepEqual(propagation.FeedbackValues(o), propagation.FeedbackValues(n)) {
				return true
			}
			om, _, of := applyFailure(o, nil)
			nm, _, nf := applyFailure(n, nil)
			return of != nf || om != nm
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}

// projectFailureChanged passes events of project ManifestWorks whose apply failure appeared,
// changed or went.
func projectFailureChanged() predicate.Predicate {
	failure := func(o client.Object) string {
		w, ok := o.(*workv1.ManifestWork)
		if !ok || !pullmodel.IsTrue(w.Labels[pullmodel.LabelProjectWork]) {
			return ""
		}
		msg, _, _ := propagation.ProjectApplyFailure(w)
		return msg
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return failure(e.Object) != "" },
		DeleteFunc:  func(e event.DeleteEvent) bool { return failure(e.Object) != "" },
		UpdateFunc:  func(e event.UpdateEvent) bool { return failure(e.ObjectOld) != failure(e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// statusInputChanged passes Application events that change its status or sync request.
func statusInputChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*unstructured.Unstructured)
		n, ok2 := e.ObjectNew.(*unstructured.Unstructured)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Object["status"], n.Object["status"]) ||
			!equality.Semantic.DeepEqual(o.Object["operation"], n.Object["operation"]) ||
			!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations())
	}}
}
