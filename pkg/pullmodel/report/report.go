// Package report keeps one MulticlusterApplicationSetReport per ApplicationSet whose
// Applications the pull model delivers: each cluster's sync, health and errors, and a summary,
// built from ManifestWork feedback alone.
package report

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/sharing"
)

// Condition types in a cluster's entry.
const (
	ConditionDeliveryError = "DeliveryError"
	ConditionSyncError     = "SyncError"
	// ConditionResourceListError: the cluster fed back a resource list that is malformed or
	// too large, so its objects are not listed.
	ConditionResourceListError = "ResourceListError"
)

// Reconciler keeps the reports, keyed by ApplicationSet.
type Reconciler struct {
	// Client writes; Cache is the pull model's own cache (ManifestWorks, ApplicationSet
	// metadata, reports), which it watches and reads.
	Client client.Client
	Cache  cache.Cache
	// Batch is how long ManifestWork changes are gathered before a rebuild (DefaultBatch).
	Batch time.Duration
	// Sealer tells the pull model's own ManifestWorks from others: a report has rows only for
	// those (a work agent may annotate any ManifestWork of its namespace).
	Sealer *seal.Sealer

	memo rowMemo
}

// NewApplicationSetMetadata returns an ApplicationSet read as metadata only: the report needs
// its existence and UID, not its spec.
func NewApplicationSetMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
	return m
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("pullmodel-report").
		WatchesRawSource(source.Kind[client.Object](r.Cache, NewApplicationSetMetadata(), &handler.EnqueueRequestForObject{},
			predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }})).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &workv1.ManifestWork{}, batched(r.batch()))).
		WatchesRawSource(source.Kind[client.Object](r.Cache, &reportv1alpha1.MulticlusterApplicationSetReport{}, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// DefaultBatch is how long ManifestWork changes are gathered before a report is rebuilt.
const DefaultBatch = 2 * time.Second

func (r *Reconciler) batch() time.Duration {
	if r.Batch > 0 {
		return r.Batch
	}
	return DefaultBatch
}

// batched enqueues a ManifestWork's ApplicationSet after a delay: a report covers every
// cluster of its ApplicationSet, so a wave of feedback (a new revision reaching a thousand
// clusters) is gathered into a few rebuilds instead of one per cluster.
func batched(delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range forWork(context.Background(), o) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}

// Reconcile writes the ApplicationSet's report when it differs from what the ManifestWorks say.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The report, the ApplicationSet's ManifestWorks and their feedback are read from the
	// cache without copies (read only): a report is rebuilt at each change of any of its
	// ManifestWorks, and copies of all of them, each time, were most of what the pull model
	// allocated while an ApplicationSet rolled.
	have := &reportv1alpha1.MulticlusterApplicationSetReport{}
	err := r.Cache.Get(ctx, req.NamespacedName, have, client.UnsafeDisableDeepCopy)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	exists := err == nil
	set := NewApplicationSetMetadata()
	if err := r.Cache.Get(ctx, req.NamespacedName, set); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.memo.forget(req.NamespacedName)
		if exists {
			return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, have))
		}
		return ctrl.Result{}, nil
	}
	works := &workv1.ManifestWorkList{}
	if err := r.Cache.List(ctx, works, client.MatchingFields{pullmodel.IndexWorkByApplicationSet: req.Namespace + "/" + req.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	// Decided before anything is built: a rebuild follows every write of the report (its own
	// included), and most find the ManifestWorks and the report as the last one left them.
	if exists && r.memo.unchanged(req.NamespacedName, works.Items, have.ResourceVersion) {
		return ctrl.Result{}, nil
	}
	want := fromRows(r.memo.rows(req.NamespacedName, works.Items, func(w *workv1.ManifestWork) bool { return propagation.Owned(r.Sealer, w) }))
	if !exists {
		rep := &reportv1alpha1.MulticlusterApplicationSetReport{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: req.Namespace, Name: req.Name,
				Labels: reportLabels(req.Namespace, req.Name),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: pullmodel.ArgoGroupVersion.String(), Kind: pullmodel.ApplicationSetGVK.Kind,
					Name: set.Name, UID: set.UID,
				}},
			},
			Statuses: want,
		}
		if err := r.Client.Create(ctx, rep); err != nil {
			return ctrl.Result{}, client.IgnoreAlreadyExists(err)
		}
		r.memo.shown(req.NamespacedName, rep.ResourceVersion)
		return ctrl.Result{}, nil
	}
	labels := reportLabels(req.Namespace, req.Name)
	labelsOK := true
	for k, v := range labels {
		labelsOK = labelsOK && have.Labels[k] == v
	}
	if sameStatuses(have.Statuses, want) && labelsOK {
		r.memo.shown(req.NamespacedName, have.ResourceVersion)
		return ctrl.Result{}, nil
	}
	upd := &reportv1alpha1.MulticlusterApplicationSetReport{TypeMeta: have.TypeMeta, ObjectMeta: *have.ObjectMeta.DeepCopy(), Statuses: want}
	if upd.Labels == nil {
		upd.Labels = map[string]string{}
	}
	maps.Copy(upd.Labels, labels)
	if err := r.Client.Update(ctx, upd); err != nil {
		return ctrl.Result{}, err
	}
	r.memo.shown(req.NamespacedName, upd.ResourceVersion)
	return ctrl.Result{}, nil
}

// sameStatuses reports whether two reports' statuses are equal as equality.Semantic.DeepEqual
// decides (an empty list equals a missing one), without reflection: the report a rebuild made
// is compared with the cached one at every rebuild, and the reflective comparison allocated
// more than the rebuild itself.
func sameStatuses(a, b reportv1alpha1.AppConditions) bool {
	return a.OmittedResources == b.OmittedResources && a.OmittedClusters == b.OmittedClusters && a.Summary == b.Summary &&
		slices.Equal(a.Resources, b.Resources) && slices.EqualFunc(a.ClusterConditions, b.ClusterConditions, sameEntry)
}

// sameEntry compares every field of two entries; TestSameStatusesAgreesWithDeepEqual fails when
// a field is added and not compared here.
func sameEntry(a, b reportv1alpha1.ClusterCondition) bool {
	return a.Cluster == b.Cluster && a.App == b.App && a.SyncStatus == b.SyncStatus && a.HealthStatus == b.HealthStatus &&
		a.OperationStateStartedAt == b.OperationStateStartedAt && a.OperationStatePhase == b.OperationStatePhase &&
		a.SyncRevision == b.SyncRevision && slices.Equal(a.Conditions, b.Conditions)
}

// Build computes a report's statuses from the ManifestWorks of an ApplicationSet's
// Applications: one entry per ManifestWork (its namespace is the cluster), sorted by cluster.
func Build(works []workv1.ManifestWork) reportv1alpha1.AppConditions {
	rows := make([]row, 0, len(works))
	for i := range works {
		if works[i].DeletionTimestamp == nil {
			rows = append(rows, rowOf(&works[i]))
		}
	}
	return fromRows(rows)
}

// row is what one ManifestWork adds to its ApplicationSet's report: its cluster's entry and the
// objects the cluster lists: decoded when the list is short, else as the cluster encoded it
// (decoded at each rebuild), so that the rows kept between rebuilds cost about what the
// ManifestWorks' feedback does (a list may take 16 KiB encoded, twice that decoded).
type row struct {
	entry     reportv1alpha1.ClusterCondition
	resources []reportv1alpha1.ResourceRef
	encoded   string
}

// maxDecodedList bounds the encoded size of the resource lists a row keeps decoded.
const maxDecodedList = 1024

// refsOf decodes a cluster's resource list, its repeated strings shared.
func refsOf(encoded string) ([]reportv1alpha1.ResourceRef, error) {
	listed, _, err := resourcelist.Decode(encoded)
	if err != nil {
		return nil, err
	}
	refs := make([]reportv1alpha1.ResourceRef, 0, len(listed))
	for _, r := range listed {
		refs = append(refs, reportv1alpha1.ResourceRef{APIVersion: sharing.String(r.APIVersion()), Kind: sharing.String(r.Kind), Namespace: sharing.String(r.Namespace), Name: r.Name})
	}
	return refs, nil
}

func rowOf(w *workv1.ManifestWork) row {
	fb := propagation.FeedbackValues(w)
	c := reportv1alpha1.ClusterCondition{
		Cluster:                 w.Namespace,
		App:                     w.Annotations[pullmodel.AnnotationHubAppNamespace] + "/" + w.Annotations[pullmodel.AnnotationHubAppName],
		SyncStatus:              orUnknown(fb[propagation.FeedbackSync]),
		HealthStatus:            orUnknown(fb[propagation.FeedbackHealth]),
		OperationStateStartedAt: fb[propagation.FeedbackOperationStarted],
		OperationStatePhase:     fb[propagation.FeedbackOperationPhase],
		SyncRevision:            fb[propagation.FeedbackRevision],
	}
	if applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); applied != nil && applied.Status == metav1.ConditionFalse {
		c.Conditions = append(c.Conditions, reportv1alpha1.Condition{Type: ConditionDeliveryError, Message: truncate(applied.Message)})
	}
	switch c.OperationStatePhase {
	case "Failed", "Error":
		c.Conditions = append(c.Conditions, reportv1alpha1.Condition{Type: ConditionSyncError, Message: truncate(fb[propagation.FeedbackOperationMessage])})
	}
	out := row{entry: c}
	encoded := fb[propagation.FeedbackResourceList]
	switch refs, err := refsOf(encoded); {
	case err != nil:
		out.entry.Conditions = append(out.entry.Conditions, reportv1alpha1.Condition{Type: ConditionResourceListError, Message: truncate(err.Error())})
	case len(encoded) > maxDecodedList:
		out.encoded = encoded
	default:
		out.resources = refs
	}
	return out
}

// fromRows makes a report's statuses from its rows.
func fromRows(rows []row) reportv1alpha1.AppConditions {
	out := reportv1alpha1.AppConditions{ClusterConditions: make([]reportv1alpha1.ClusterCondition, 0, len(rows))}
	var synced, healthy, inProgress int
	// Every row's objects in one list, sorted and made distinct below: a list sized for the
	// rows' decoded lists (a long one, kept encoded, is decoded and added below) costs a rebuild
	// less than a set grown object by object and then listed.
	listed := 0
	for _, r := range rows {
		listed += len(r.resources)
	}
	resources := make([]reportv1alpha1.ResourceRef, 0, listed)
	for _, r := range rows {
		c := r.entry
		// Each entry's conditions its own: the rows are kept for the next rebuild.
		c.Conditions = slices.Clone(c.Conditions)
		refs := r.resources
		if r.encoded != "" {
			refs, _ = refsOf(r.encoded)
		}
		resources = append(resources, refs...)
		if c.SyncStatus == "Synced" {
			synced++
		}
		// Counted as Red Hat ACM counts: Progressing is not healthy and also in progress; an
		// Application whose cluster has not reported is Unknown, not healthy.
		switch c.HealthStatus {
		case "Healthy":
			healthy++
		case "Progressing":
			inProgress++
		}
		out.ClusterConditions = append(out.ClusterConditions, c)
	}
	n := len(out.ClusterConditions)
	out.ClusterConditions, out.OmittedClusters = withinBudget(out.ClusterConditions)
	out.Resources, out.OmittedResources = resourcesWithinBudget(resources)
	out.Summary = reportv1alpha1.ReportSummary{
		Clusters:   strconv.Itoa(n),
		Synced:     strconv.Itoa(synced),
		NotSynced:  strconv.Itoa(n - synced),
		Healthy:    strconv.Itoa(healthy),
		NotHealthy: strconv.Itoa(n - healthy),
		InProgress: strconv.Itoa(inProgress),
	}
	return out
}

// rowMemo keeps each ApplicationSet's rows by ManifestWork UID, with the resource version they
// were made from: a rebuild runs at each change of any of an ApplicationSet's ManifestWorks,
// and makes again only the rows of those that changed (checking a ManifestWork's seal and
// decoding its cluster's feedback and resource list were most of a rebuild). Each rebuild
// keeps exactly its ManifestWorks' rows, so a deleted one's row goes with the next rebuild, and
// a deleted ApplicationSet's with its report. It also keeps the version of the report that
// showed those rows, so that a rebuild with nothing new does nothing.
//
// A set's rows are read and written only by the reconcile of that set, which controller-runtime
// never runs twice at once (a caller of Reconcile outside a controller must not either); mu
// guards the map of sets.
type rowMemo struct {
	mu   sync.Mutex
	sets map[types.NamespacedName]*setRows
}

type setRows struct {
	rows map[types.UID]memoRow
	// pass counts the rebuilds; a row not seen in the latest is dropped.
	pass uint64
	// report is the resource version of the report written from, or found equal to, the rows;
	// "" until then.
	report string
}

type memoRow struct {
	resourceVersion string
	pass            uint64
	// owned: the pull model wrote the ManifestWork (its seal verifies); others have no row.
	owned bool
	row   row
}

func (m *rowMemo) set(set types.NamespacedName) *setRows {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sets[set]
	if s == nil {
		if m.sets == nil {
			m.sets = map[types.NamespacedName]*setRows{}
		}
		s = &setRows{rows: map[types.UID]memoRow{}}
		m.sets[set] = s
	}
	return s
}

// unchanged reports whether works are the ManifestWorks, at the versions, that set's rows were
// last made from, and report is the version of the report that showed them.
func (m *rowMemo) unchanged(set types.NamespacedName, works []workv1.ManifestWork, report string) bool {
	m.mu.Lock()
	s := m.sets[set]
	m.mu.Unlock()
	if s == nil || s.report == "" || s.report != report {
		return false
	}
	n := 0
	for i := range works {
		w := &works[i]
		if w.DeletionTimestamp != nil {
			continue
		}
		if r, ok := s.rows[w.UID]; !ok || r.resourceVersion != w.ResourceVersion {
			return false
		}
		n++
	}
	return n == len(s.rows)
}

// shown records the version of set's report that shows its rows.
func (m *rowMemo) shown(set types.NamespacedName, report string) {
	m.set(set).report = report
}

// rows returns the rows of the works owned says are the pull model's and not being deleted,
// made again only where a ManifestWork changed, and keeps them for set.
func (m *rowMemo) rows(set types.NamespacedName, works []workv1.ManifestWork, owned func(*workv1.ManifestWork) bool) []row {
	s := m.set(set)
	s.pass++
	s.report = ""
	out := make([]row, 0, len(works))
	seen := 0
	for i := range works {
		w := &works[i]
		if w.DeletionTimestamp != nil {
			continue
		}
		r, ok := s.rows[w.UID]
		if !ok || r.resourceVersion != w.ResourceVersion {
			r = memoRow{resourceVersion: w.ResourceVersion, owned: owned(w)}
			if r.owned {
				r.row = rowOf(w)
			}
		}
		r.pass = s.pass
		s.rows[w.UID] = r
		seen++
		if r.owned {
			out = append(out, r.row)
		}
	}
	if seen < len(s.rows) {
		maps.DeleteFunc(s.rows, func(_ types.UID, r memoRow) bool { return r.pass != s.pass })
	}
	return out
}

func (m *rowMemo) forget(set types.NamespacedName) {
	m.mu.Lock()
	delete(m.sets, set)
	m.mu.Unlock()
}

// EntryBudget bounds the JSON size of a report's cluster entries: 700,000 bytes, about 2,800
// clusters with short messages. With ResourceBudget it keeps a report under half of etcd's
// 1.5 MiB object limit, so that the report and a concurrent update of it always fit.
const EntryBudget = 700_000

// ResourceBudget bounds the JSON size of a report's resource list: 64 KiB, about 600 objects.
// The Applications of one ApplicationSet usually deploy the same objects on every cluster, so
// the union is about one Application's list.
const ResourceBudget = 64 * 1024

// resourcesWithinBudget returns the distinct objects of all, sorted, as many as fit
// ResourceBudget, and how many were left out. all is sorted in place.
func resourcesWithinBudget(all []reportv1alpha1.ResourceRef) ([]reportv1alpha1.ResourceRef, int) {
	slices.SortFunc(all, func(a, b reportv1alpha1.ResourceRef) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.APIVersion, b.APIVersion),
			strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	all = slices.Compact(all)
	kept := fitting(all, ResourceBudget)
	if kept == 0 {
		return nil, len(all)
	}
	return all[:kept], len(all) - kept
}

// maxMessageBytes bounds each message in an entry.
const maxMessageBytes = 512

func truncate(s string) string { return pullmodel.Truncate(s, maxMessageBytes) }

// withinBudget returns the entries that fit EntryBudget, those with a problem first, sorted by
// cluster and Application, and how many were left out.
func withinBudget(all []reportv1alpha1.ClusterCondition) ([]reportv1alpha1.ClusterCondition, int) {
	problem := func(c reportv1alpha1.ClusterCondition) bool {
		return c.SyncStatus != "Synced" || c.HealthStatus != "Healthy" || len(c.Conditions) > 0
	}
	byName := func(a, b reportv1alpha1.ClusterCondition) int {
		if a.Cluster != b.Cluster {
			return strings.Compare(a.Cluster, b.Cluster)
		}
		return strings.Compare(a.App, b.App)
	}
	slices.SortFunc(all, func(a, b reportv1alpha1.ClusterCondition) int {
		if pa, pb := problem(a), problem(b); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return byName(a, b)
	})
	kept := fitting(all, EntryBudget)
	out := all[:kept]
	slices.SortFunc(out, byName)
	return out, len(all) - kept
}

// fitting is how many of items, from the first, fit budget bytes as a JSON list, brackets
// included. Each item is measured by encoding it to a counter, not to a buffer of its own: every
// entry of a report is measured at each rebuild.
func fitting[T any](items []T, budget int) int {
	// The opening bracket.
	size := byteCount(1)
	enc := json.NewEncoder(&size)
	for i := range items {
		// A pointer encodes as its item does, and is not a copy of it. Each encoding ends in a
		// newline, one byte as the comma after it (or the closing bracket) is.
		_ = enc.Encode(&items[i])
		if int(size) > budget {
			return i
		}
	}
	return len(items)
}

// byteCount is an io.Writer that counts what is written to it.
type byteCount int

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// orUnknown is a status the cluster has not reported yet, as Red Hat ACM's reports show it.
func orUnknown(s string) string {
	if s == "" {
		return "Unknown"
	}
	return s
}

// LabelHostingApplicationSet on a report names its ApplicationSet as "<namespace>.<name>", cut to
// a label value's 63 characters, the label Red Hat ACM's reports carry (left off when the cut
// value is not a valid label value).
const LabelHostingApplicationSet = "apps.open-cluster-management.io/hosting-applicationset"

// reportLabels are a report's labels for the ApplicationSet namespace/name.
func reportLabels(namespace, name string) map[string]string {
	labels := map[string]string{pullmodel.LabelApplicationSet: "true"}
	v := namespace + "." + name
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	if len(validation.IsValidLabelValue(v)) == 0 {
		labels[LabelHostingApplicationSet] = v
	}
	return labels
}

func forWork(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := strings.Cut(pullmodel.Annotation(o, pullmodel.AnnotationApplicationSet), "/")
	if !ok || ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}
