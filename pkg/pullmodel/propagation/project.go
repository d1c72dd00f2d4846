package propagation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
)

// A hub AppProject reaches a cluster in a ManifestWork of its own, one per cluster and
// project, however many of the cluster's Applications name it: an edit of a project that N
// Applications share is one ManifestWork write per cluster, not N. The project's ManifestWork
// exists while at least one Application for that cluster naming the project is authorized
// (Authorize), or one delivered before still runs there under it (its ManifestWork is kept when
// it is refused), and goes when the last one does. The AppProject is orphaned, so that the work agent never deletes it on the cluster, neither
// then nor when it leaves a ManifestWork: a project is policy, and one of that name may have
// been the cluster's own before.

// projectWorkSuffix ends every project ManifestWork's name. An Application's ManifestWork is
// named "<application>-" and five characters of its UID, all hex digits; "t" is not one, so
// the two kinds of names never meet.
const projectWorkSuffix = ".appproject"

// ProjectWorkName is the name of the ManifestWork that carries hub AppProject project to a
// cluster: "<project>.appproject", or, past the 253 characters of a name, the project's name
// cut short with a hash of it.
func ProjectWorkName(project string) string {
	name := project + projectWorkSuffix
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(project))
	hash := hex.EncodeToString(sum[:5])
	prefix := strings.TrimRight(project[:validation.DNS1123SubdomainMaxLength-len(projectWorkSuffix)-len(hash)-1], "-.")
	return prefix + "-" + hash + projectWorkSuffix
}

// ProjectSealFields are the fields of a project ManifestWork its seal covers.
func ProjectSealFields(w *workv1.ManifestWork) seal.Fields {
	return seal.Fields{Namespace: w.Namespace, Name: w.Name, Project: w.Annotations[pullmodel.AnnotationHubProject]}
}

// OwnedProjectWork reports whether a ManifestWork is a project ManifestWork the pull model
// wrote: at the name of the hub AppProject it names, and sealed.
func OwnedProjectWork(s *seal.Sealer, w *workv1.ManifestWork) bool {
	p := w.Annotations[pullmodel.AnnotationHubProject]
	return s != nil && p != "" && w.Name == ProjectWorkName(p) && s.Verify(ProjectSealFields(w), w.Annotations[seal.Annotation])
}

// projectIdentifier is the AppProject's place on the cluster.
func projectIdentifier(project *unstructured.Unstructured) workv1.ResourceIdentifier {
	return workv1.ResourceIdentifier{Group: pullmodel.AppProjectGVK.Group, Resource: "appprojects", Namespace: project.GetNamespace(), Name: project.GetName()}
}

// orphaned is the delete option that leaves the AppProject on the cluster.
func orphaned(id workv1.ResourceIdentifier) *workv1.DeleteOption {
	return &workv1.DeleteOption{
		PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
		SelectivelyOrphan: &workv1.SelectivelyOrphan{OrphaningRules: []workv1.OrphaningRule{workv1.OrphaningRule(id)}},
	}
}

// forcedApply is the update strategy of the AppProject: the hub's copy wins over one of that
// name on the cluster.
func forcedApply() *workv1.UpdateStrategy {
	return &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeServerSideApply, ServerSideApply: &workv1.ServerSideApplyConfig{Force: true, FieldManager: workv1.DefaultFieldManager}}
}

// BuildProjectWork returns the ManifestWork that carries hub AppProject project to cluster,
// into the cluster's Argo CD namespace (SpokeProject), orphaned. It is unsealed.
func BuildProjectWork(cluster, spokeNamespace string, project *unstructured.Unstructured) (*workv1.ManifestWork, error) {
	spoke := SpokeProject(project, spokeNamespace)
	raw, err := json.Marshal(spoke.Object)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxWorkBytes {
		return nil, &TooLargeError{What: fmt.Sprintf("AppProject %q", project.GetName()), Bytes: len(raw)}
	}
	id := projectIdentifier(spoke)
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cluster,
			Name:        ProjectWorkName(project.GetName()),
			Labels:      map[string]string{pullmodel.LabelPull: "true", pullmodel.LabelProjectWork: "true"},
			Annotations: map[string]string{pullmodel.AnnotationHubProject: project.GetName()},
		},
		Spec: workv1.ManifestWorkSpec{
			Workload:        workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ManifestConfigs: []workv1.ManifestConfigOption{{ResourceIdentifier: id, FeedbackScrapeType: workv1.FeedbackPollType, UpdateStrategy: forcedApply()}},
			DeleteOption:    orphaned(id),
		},
	}, nil
}

// projectManifest is the status of the AppProject of a project ManifestWork at namespace on
// the cluster, as the work agent last reported it, or nil.
func projectManifest(w *workv1.ManifestWork, namespace string) *metav1.Condition {
	name := w.Annotations[pullmodel.AnnotationHubProject]
	for _, m := range w.Status.ResourceStatus.Manifests {
		r := m.ResourceMeta
		if r.Group == pullmodel.AppProjectGVK.Group && r.Resource == "appprojects" && r.Name == name && r.Namespace == namespace {
			return meta.FindStatusCondition(m.Conditions, workv1.ManifestApplied)
		}
	}
	return nil
}

// ProjectApplied reports whether the work agent has applied the AppProject of a project
// ManifestWork at namespace on the cluster. Once applied it stays there (orphaned), whatever
// the ManifestWork's later generations; so an Application delivered now finds it.
func ProjectApplied(w *workv1.ManifestWork, namespace string) bool {
	c := projectManifest(w, namespace)
	return w.DeletionTimestamp == nil && c != nil && c.Status == metav1.ConditionTrue
}

// ProjectApplyFailure is the work agent's message when it could not apply the AppProject of a
// project ManifestWork (forbidden, missing CRD or namespace), with when that began.
func ProjectApplyFailure(w *workv1.ManifestWork) (string, string, bool) {
	name := w.Annotations[pullmodel.AnnotationHubProject]
	for _, m := range w.Status.ResourceStatus.Manifests {
		r := m.ResourceMeta
		if r.Group != pullmodel.AppProjectGVK.Group || r.Resource != "appprojects" || r.Name != name {
			continue
		}
		if c := meta.FindStatusCondition(m.Conditions, workv1.ManifestApplied); c != nil && c.Status == metav1.ConditionFalse {
			return c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339), true
		}
	}
	return "", "", false
}

// payloadProject is the AppProject the Application a ManifestWork delivers names.
func payloadProject(w *workv1.ManifestWork) string {
	spec, _ := payload(w)["spec"].(map[string]any)
	if p, _ := spec["project"].(string); p != "" {
		return p
	}
	return pullmodel.DefaultProject
}

// carriesProjectCopy reports whether an Application's ManifestWork carries a copy of the
// AppProject project, as every one did before projects had ManifestWorks of their own.
func carriesProjectCopy(w *workv1.ManifestWork, project string) bool {
	if len(w.Spec.Workload.Manifests) < 2 {
		return false
	}
	for _, c := range w.Spec.ManifestConfigs {
		if c.ResourceIdentifier.Resource == "appprojects" && c.ResourceIdentifier.Name == project {
			return true
		}
	}
	return false
}

// projectReconciler keeps one ManifestWork per cluster and AppProject, keyed by the
// ManagedCluster's namespace and the AppProject's name.
type projectReconciler struct{ r *Reconciler }

func (p *projectReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := p.r
	cluster, name := req.Namespace, req.Name
	have := &workv1.ManifestWork{}
	switch err := r.Cache.Get(ctx, client.ObjectKey{Namespace: cluster, Name: ProjectWorkName(name)}, have); {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return ctrl.Result{}, err
	case !OwnedProjectWork(r.Sealer, have):
		// Not one this manager wrote: never written over nor deleted. The Applications that
		// wait for it say so (ReasonWorkNameTaken).
		return ctrl.Result{}, nil
	}
	want, err := p.desired(ctx, cluster, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if want == nil {
		if have == nil || have.DeletionTimestamp != nil {
			return ctrl.Result{}, nil
		}
		// The cache may not have seen an Application that needs it yet (created or moved to
		// the project just now): the API server confirms before the ManifestWork goes. A hub
		// AppProject that is gone has nothing left to deliver, whoever still names it.
		gone, err := p.projectGone(ctx, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		needed := false
		if !gone {
			if needed, err = p.neededLive(ctx, cluster, name); err != nil {
				return ctrl.Result{}, err
			}
		}
		if needed {
			// Its events wake this key; this is in case one is missed.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		// The AppProject stays on the cluster (orphaned).
		log.FromContext(ctx).Info("deleting the AppProject's ManifestWork: no Application for the cluster uses it", "namespace", have.Namespace, "name", have.Name)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}))
	}
	if have != nil && have.DeletionTimestamp != nil {
		// Being deleted: made anew once it is gone (its deletion event requeues).
		return ctrl.Result{}, nil
	}
	want.Annotations[seal.Annotation] = r.Sealer.Sign(ProjectSealFields(want))
	_, err = r.apply(ctx, have, want)
	return ctrl.Result{}, err
}

// desired is the ManifestWork of AppProject name for cluster, or nil when no Application for
// the cluster that names it is authorized and no ManifestWork of the pull model delivers one
// that names it there. The first authorized one decides where it lands (all of them are
// delivered into the cluster's Argo CD namespace); without one, the place of a delivered one. An AppProject too large
// for a ManifestWork is left as it is (its Applications are refused with TooLarge).
func (p *projectReconciler) desired(ctx context.Context, cluster, name string) (*workv1.ManifestWork, error) {
	r := p.r
	if name == pullmodel.DefaultProject {
		return nil, nil
	}
	project := NewAppProject()
	if err := r.Cache.Get(ctx, client.ObjectKey{Namespace: r.Policy.ArgoCDNamespace, Name: name}, project); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	apps := pullmodel.NewApplicationList()
	if err := r.Cache.List(ctx, apps, client.MatchingFields{pullmodel.IndexAppByClusterProject: pullmodel.ClusterProjectKey(cluster, name)}); err != nil {
		return nil, err
	}
	for i := range apps.Items {
		app := &apps.Items[i]
		if !pullmodel.Marked(app) || app.GetDeletionTimestamp() != nil || pullmodel.TargetCluster(app) != cluster || pullmodel.ProjectOf(app) != name {
			continue
		}
		refusal, policy, err := r.check(ctx, app)
		if err != nil {
			return nil, err
		}
		if refusal != nil {
			continue
		}
		return buildProjectWork(ctx, cluster, policy.SpokeNamespace, project)
	}
	// An Application refused now keeps what was delivered before (a lost right never tears a
	// workload down), and the cluster's Argo CD keeps running it under this project: the
	// project must follow the hub, tightened included, for as long as any ManifestWork of the
	// pull model still delivers such an Application there.
	works := &workv1.ManifestWorkList{}
	if err := r.Cache.List(ctx, works, client.MatchingFields{pullmodel.IndexWorkByClusterProject: pullmodel.ClusterProjectKey(cluster, name)}); err != nil {
		return nil, err
	}
	for i := range works.Items {
		w := &works.Items[i]
		if at := pullmodel.SpokeApplicationOf(w); at.Namespace != "" && Owned(r.Sealer, w) {
			return buildProjectWork(ctx, cluster, at.Namespace, project)
		}
	}
	return nil, nil
}

// projectGone reports whether the hub has no AppProject name, as the API server says (the
// cache may not have seen a new one yet).
func (p *projectReconciler) projectGone(ctx context.Context, name string) (bool, error) {
	r := p.r
	key := client.ObjectKey{Namespace: r.Policy.ArgoCDNamespace, Name: name}
	if err := r.Cache.Get(ctx, key, NewAppProject()); !apierrors.IsNotFound(err) {
		return false, err
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(pullmodel.AppProjectGVK)
	err := r.APIReader.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// liveListPage is the page size of the live reads that confirm a project ManifestWork's
// deletion.
const liveListPage = 500

// neededLive reads around the cache what desired read in it, for a project ManifestWork the
// cache says no one needs: whether the cluster's namespace holds a ManifestWork of the pull
// model delivering an Application under the project, or the hub an authorized Application for
// the cluster naming it that the cache has not seen as it is now. The Applications are listed
// as metadata only (the cluster is an annotation) and only those the cache lacks or holds at
// another version are read whole. It costs one list of the marked Applications' metadata per
// deletion, which happens only when the last Application of a project on a cluster goes.
func (p *projectReconciler) neededLive(ctx context.Context, cluster, name string) (bool, error) {
	r := p.r
	works := &workv1.ManifestWorkList{}
	if err := r.APIReader.List(ctx, works, client.InNamespace(cluster), client.HasLabels{pullmodel.LabelPull}); err != nil {
		return false, err
	}
	for i := range works.Items {
		w := &works.Items[i]
		if pullmodel.DeliveredProject(w) == name && pullmodel.SpokeApplicationOf(w).Namespace != "" && Owned(r.Sealer, w) {
			return true, nil
		}
	}
	opts := []client.ListOption{client.HasLabels{pullmodel.LabelPull}, client.Limit(liveListPage)}
	for cont := ""; ; {
		apps := &metav1.PartialObjectMetadataList{}
		apps.SetGroupVersionKind(pullmodel.ArgoGroupVersion.WithKind("ApplicationList"))
		if err := r.APIReader.List(ctx, apps, append(opts, client.Continue(cont))...); err != nil {
			return false, err
		}
		for i := range apps.Items {
			m := &apps.Items[i]
			if !pullmodel.Marked(m) || pullmodel.TargetCluster(m) != cluster || m.DeletionTimestamp != nil {
				continue
			}
			key := client.ObjectKeyFromObject(m)
			cached := pullmodel.NewApplication()
			if err := r.Cache.Get(ctx, key, cached); err == nil && cached.GetResourceVersion() == m.ResourceVersion {
				continue // desired has judged it as it is
			} else if client.IgnoreNotFound(err) != nil {
				return false, err
			}
			app := pullmodel.NewApplication()
			if err := r.APIReader.Get(ctx, key, app); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return false, err
			}
			if !pullmodel.Marked(app) || app.GetDeletionTimestamp() != nil || pullmodel.TargetCluster(app) != cluster || pullmodel.ProjectOf(app) != name {
				continue
			}
			refusal, _, err := r.check(ctx, app)
			if err != nil {
				return false, err
			}
			if refusal == nil {
				log.FromContext(ctx).Info("keeping the AppProject's ManifestWork: the cache has not seen an Application that needs it yet", "namespace", cluster, "project", name, "application", key.String())
				return true, nil
			}
		}
		if cont = apps.Continue; cont == "" {
			return false, nil
		}
	}
}

func buildProjectWork(ctx context.Context, cluster, spokeNamespace string, project *unstructured.Unstructured) (*workv1.ManifestWork, error) {
	w, err := BuildProjectWork(cluster, spokeNamespace, project)
	if err != nil {
		log.FromContext(ctx).Error(err, "the AppProject is not delivered")
		return nil, reconcile.TerminalError(err)
	}
	return w, nil
}

// projectKeys are the project ManifestWorks an Application's delivery may need: its cluster's
// ManifestWork of the AppProject it names.
func projectKeys(apps ...*unstructured.Unstructured) []reconcile.Request {
	var out []reconcile.Request
	seen := map[types.NamespacedName]bool{}
	for _, app := range apps {
		if app == nil {
			continue
		}
		k := types.NamespacedName{Namespace: pullmodel.TargetCluster(app), Name: pullmodel.ProjectOf(app)}
		if k.Namespace == "" || k.Name == pullmodel.DefaultProject || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, reconcile.Request{NamespacedName: k})
	}
	return out
}

// projectKeysFor maps Applications (reconcile requests of theirs) to their project
// ManifestWorks. It reads each Application's cluster and project from the cache's own object,
// never a copy: a binding or cluster set wakes every Application of a namespace, and copies of
// all of them, held at once, were the manager's largest burst of memory as it started.
func (r *Reconciler) projectKeysFor(ctx context.Context, apps []reconcile.Request) []reconcile.Request {
	var found []*unstructured.Unstructured
	for _, req := range apps {
		app := pullmodel.NewApplication()
		if err := r.Cache.Get(ctx, req.NamespacedName, app, client.UnsafeDisableDeepCopy); err == nil {
			found = append(found, app)
		}
	}
	return projectKeys(found...)
}

// forProjectWork maps a project ManifestWork to itself.
func forProjectWork(_ context.Context, o client.Object) []reconcile.Request {
	p := pullmodel.Annotation(o, pullmodel.AnnotationHubProject)
	if !pullmodel.IsTrue(pullmodel.Label(o, pullmodel.LabelProjectWork)) || p == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: p}}}
}

// appsOfProjectWork maps a project ManifestWork to the Applications of its cluster that name
// its AppProject.
func (r *Reconciler) appsOfProjectWork(ctx context.Context, o client.Object) []reconcile.Request {
	p := pullmodel.Annotation(o, pullmodel.AnnotationHubProject)
	if !pullmodel.IsTrue(pullmodel.Label(o, pullmodel.LabelProjectWork)) || p == "" {
		return nil
	}
	return r.apps(ctx, client.MatchingFields{pullmodel.IndexAppByClusterProject: pullmodel.ClusterProjectKey(o.GetNamespace(), p)})
}

// projectReadinessChanged passes project ManifestWork events that can let an Application
// waiting for its AppProject through, or stop it: created, deleted, the AppProject's applied
// state or place on the cluster changed. An edit of the project alone (its generation) wakes
// no Application.
func projectReadinessChanged() predicate.Predicate {
	state := func(o client.Object) string {
		w, ok := o.(*workv1.ManifestWork)
		if !ok || !pullmodel.IsTrue(w.Labels[pullmodel.LabelProjectWork]) {
			return ""
		}
		var b strings.Builder
		for _, m := range w.Status.ResourceStatus.Manifests {
			c := meta.FindStatusCondition(m.Conditions, workv1.ManifestApplied)
			if c != nil {
				fmt.Fprintf(&b, "%s/%s=%s:%s;", m.ResourceMeta.Namespace, m.ResourceMeta.Name, c.Status, c.Message)
			}
		}
		fmt.Fprintf(&b, "deleting=%t;%s", w.DeletionTimestamp != nil, w.Annotations[seal.Annotation])
		return b.String()
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return pullmodel.IsTrue(pullmodel.Label(e.Object, pullmodel.LabelProjectWork))
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			return pullmodel.IsTrue(pullmodel.Label(e.Object, pullmodel.LabelProjectWork))
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			return pullmodel.IsTrue(pullmodel.Label(e.ObjectNew, pullmodel.LabelProjectWork)) && state(e.ObjectOld) != state(e.ObjectNew)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// projectWorkChanged passes project ManifestWork events the project controller acts on:
// created, deleted, or its spec, labels or annotations changed (by anyone but this manager,
// whose own writes it then sees once).
func projectWorkChanged() predicate.Predicate {
	is := func(o client.Object) bool { return pullmodel.IsTrue(pullmodel.Label(o, pullmodel.LabelProjectWork)) }
	return predicate.And(
		predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
			DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return is(e.ObjectOld) || is(e.ObjectNew) },
			GenericFunc: func(event.GenericEvent) bool { return false },
		},
		predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}, deleted()),
	)
}

// appWorkProjectHandler enqueues the project ManifestWork of the AppProject an Application's
// ManifestWork delivers under, before and after a change: its deletion, or its move to another
// project, may end the last delivery under that project on the cluster.
func appWorkProjectHandler() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			w, ok := o.(*workv1.ManifestWork)
			if !ok {
				continue
			}
			if p := pullmodel.DeliveredProject(w); p != "" && p != pullmodel.DefaultProject {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: p}})
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// appProjectHandler enqueues the project ManifestWorks an Application needs, before and after
// a change (it may have moved to another cluster or project).
func appProjectHandler() handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		var apps []*unstructured.Unstructured
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				apps = append(apps, u)
			}
		}
		for _, k := range projectKeys(apps...) {
			q.Add(k)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}
