// Package propagation wraps each marked hub Application into a ManifestWork in its cluster's
// namespace, and each hub AppProject they name into one ManifestWork per cluster, removes
// ManifestWorks whose Application is gone, and releases the hub Application's resources
// finalizer once its ManifestWork is gone.
package propagation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// MaxWorkBytes is the largest manifest payload OCM's work webhook accepts in one ManifestWork
// (500 KiB). An Application larger than this is refused with a condition instead.
const MaxWorkBytes = 500 * 1024

// Feedback names: one JSONPath rule each on the spoke Application, read back by the status
// and report controllers. The first five are the names the upstream controller uses.
const (
	FeedbackHealth           = "healthStatus"
	FeedbackSync             = "syncStatus"
	FeedbackOperationStarted = "operationStateStartedAt"
	FeedbackOperationPhase   = "operationStatePhase"
	FeedbackRevision         = "syncRevision"
	FeedbackOperationEnded   = "operationStateFinishedAt"
	FeedbackOperationMessage = "operationStateMessage"
	FeedbackReconciledAt     = "reconciledAt"
	// FeedbackOperationRequest is the request the spoke's last operation ran
	// (pullmodel.AnnotationOperationRequest), "" for one the hub did not send.
	FeedbackOperationRequest = "operationStateRequest"
)

// Feedback names of list fields of the spoke Application (see FeedbackLists).
const (
	FeedbackConditionTypes    = "conditionTypes"
	FeedbackConditionMessages = "conditionMessages"
	FeedbackConditionTimes    = "conditionTransitionTimes"
	FeedbackSyncRevisions     = "syncRevisions"
	// FeedbackHealthMessage is the spoke Application's health message.
	FeedbackHealthMessage = "healthMessage"
	// FeedbackResourceList is the spoke Application's list of objects, as the cluster's resource
	// reporter writes it (package resourcelist): the hub Application's status.resources, and its
	// ApplicationSet's report, list them.
	FeedbackResourceList = "resourceList"
)

// requestsRunOnce keeps a request the spoke's Argo CD has run from being put back. Argo CD
// clears a sync request (.operation) and a refresh request (the refresh annotation) once it
// has run them. With any ignoreFields entry, OCM's work agent records a hash of the manifest on
// the object and skips the apply while the manifest is unchanged (its periodic resync and a
// change of the ManifestWork's labels included), so neither request is re-applied, and run
// again, until the hub sends a changed manifest. OnSpokeChange keeps the path itself applied
// whenever the manifest changes. The annotation needs no path of its own: the hash is what
// holds it, and a JSONPath cannot name a key with dots in OCM's ignoreFields. Each ManifestWork
// gets a list of its own: a write decodes the API server's answer into the object it sent, in
// place, and a list shared between ManifestWorks would be written by concurrent reconciles.
func requestsRunOnce() []workv1.IgnoreField {
	return []workv1.IgnoreField{{Condition: workv1.IgnoreFieldsConditionOnSpokeChange, JSONPaths: []string{".operation"}}}
}

// feedbackPaths are the spoke Application fields fed back to the hub. The operation's start is
// what ApplicationSet progressive sync compares with its own transition times, so it comes back
// as the spoke wrote them. The conditions, the health message and the operation message are
// what a person needs to see why an Application is not Synced or Healthy.
//
// Lists are read with [*]: OCM's work agent feeds back scalar values, so a stock one reports the
// first item only (the first condition; an index past a list's end would put its feedback
// condition in error), and one with its alpha RawFeedbackJsonString gate reports the whole list
// as JSON (see FeedbackLists).
//
// The reconcile time is not among them: the spoke's Argo CD rewrites it on every periodic
// refresh (120 s by default), and each change would cost a ManifestWork status write by the
// work agent and a hub Application write, while nothing happens. It is fed back only while the
// hub needs it (reconcileFeedback).
var feedbackPaths = []workv1.JsonPath{
	{Name: FeedbackHealth, Path: ".status.health.status"},
	{Name: FeedbackSync, Path: ".status.sync.status"},
	{Name: FeedbackOperationStarted, Path: ".status.operationState.startedAt"},
	{Name: FeedbackOperationPhase, Path: ".status.operationState.phase"},
	{Name: FeedbackRevision, Path: ".status.sync.revision"},
	{Name: FeedbackOperationEnded, Path: ".status.operationState.finishedAt"},
	{Name: FeedbackOperationMessage, Path: ".status.operationState.message"},
	{Name: FeedbackHealthMessage, Path: ".status.health.message"},
	{Name: FeedbackConditionTypes, Path: ".status.conditions[*].type"},
	{Name: FeedbackConditionMessages, Path: ".status.conditions[*].message"},
	{Name: FeedbackConditionTimes, Path: ".status.conditions[*].lastTransitionTime"},
	{Name: FeedbackSyncRevisions, Path: ".status.sync.revisions[*]"},
	// One string, selected by name like the error conditions below.
	{Name: FeedbackOperationRequest, Path: `.status.operationState.operation.info[?(@.name=="` + pullmodel.OperationRequestInfo + `")].value`},
}

// ErrorConditionTypes are the spoke Application's error conditions fed back by type: Argo CD's
// condition types ending in "Error" (ApplicationCondition.IsError), as Argo CD v3 defines them.
// Argo CD sorts conditions by type, so a stock work agent's first condition is often a warning
// (ExcludedResourceWarning sorts before InvalidSpecError, OrphanedResourceWarning and
// SharedResourceWarning before SyncError). One rule per type selects that condition alone: a
// single string, which OCM's work agent feeds back whole without a gate, and which a message
// over the 1,024 bytes of the gate's JSON lists never makes vanish.
var ErrorConditionTypes = []string{"ComparisonError", "DeletionError", "InvalidSpecError", "SyncError", "UnknownError"}

// FeedbackErrorMessage is the feedback name of the message of the spoke's condition of an
// ErrorConditionTypes type.
func FeedbackErrorMessage(conditionType string) string {
	return "condition" + conditionType + "Message"
}

// FeedbackErrorTime is the feedback name of that condition's transition time.
func FeedbackErrorTime(conditionType string) string { return "condition" + conditionType + "Time" }

// errorConditionPaths are the rules of ErrorConditionTypes. A condition that is absent yields
// no value and no error (the work agent reads paths with missing keys allowed).
var errorConditionPaths = func() []workv1.JsonPath {
	var out []workv1.JsonPath
	for _, t := range ErrorConditionTypes {
		sel := `.status.conditions[?(@.type=="` + t + `")]`
		out = append(out, workv1.JsonPath{Name: FeedbackErrorMessage(t), Path: sel + ".message"}, workv1.JsonPath{Name: FeedbackErrorTime(t), Path: sel + ".lastTransitionTime"})
	}
	return out
}()

// reconcileAfterSyncPending reports whether the hub Application, owned by an ApplicationSet,
// shows a finished operation but no reconcile since: the spoke's Argo CD reconciles again once
// it has recorded the operation's end, and progressive sync waits for that reconcile time,
// which may come after the sync request is cleared (and with it the other reason to feed the
// time back). It costs one more ManifestWork write after a sync the hub asked for (the rule
// goes in a write of its own), two after one the spoke ran by itself; Applications without an
// ApplicationSet have no progressive sync and do not pay it.
func reconcileAfterSyncPending(app *unstructured.Unstructured) bool {
	if pullmodel.OwningApplicationSet(app) == "" {
		return false
	}
	finished, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "finishedAt")
	end, err := time.Parse(time.RFC3339, finished)
	if err != nil {
		return false
	}
	reconciled, _, _ := unstructured.NestedString(app.Object, "status", "reconciledAt")
	at, err := time.Parse(time.RFC3339, reconciled)
	return err != nil || at.Before(end)
}

// FeedsBackReconcileTime reports whether a ManifestWork's feedback rules read the spoke's
// reconcile time.
func FeedsBackReconcileTime(w *workv1.ManifestWork) bool {
	for _, c := range w.Spec.ManifestConfigs {
		for _, r := range c.FeedbackRules {
			for _, p := range r.JsonPaths {
				if p.Name == FeedbackReconciledAt {
					return true
				}
			}
		}
	}
	return false
}

// resourceListFeedback reads the reporter's annotation: a string, which a stock work agent
// feeds back whole, unlike a list. Without a reporter on the cluster it is absent, and OCM
// skips an absent value without an error.
var resourceListFeedback = workv1.JsonPath{Name: FeedbackResourceList, Path: ".metadata.annotations." + strings.ReplaceAll(pullmodel.AnnotationResourceList, ".", `\.`)}

// reconcileFeedback is the rule for the spoke's reconcile time, see feedbackPaths.
var reconcileFeedback = workv1.JsonPath{Name: FeedbackReconciledAt, Path: ".status.reconciledAt"}

// Input is what a ManifestWork is built from.
type Input struct {
	// App is the hub Application.
	App *unstructured.Unstructured
	// OperationRequest names the hub Application's current sync request (see
	// pullmodel.AnnotationOperationRequest).
	OperationRequest string
	// RefreshBaseline is the spoke's last reconcile time when the hub Application's current
	// refresh request was first sent (see pullmodel.AnnotationRefreshBaseline).
	RefreshBaseline string
	// Spoke is where the Application lands on the cluster (SpokePlace); when empty, in the
	// default Argo CD namespace under its own name.
	Spoke types.NamespacedName
	// ProjectCopy is the hub AppProject the Application names, carried in its own ManifestWork
	// as every Application's ManifestWork carried it before AppProjects had ManifestWorks of
	// their own (project.go): kept there, current, until the project's ManifestWork is applied
	// on the cluster, so that the work agent always has one ManifestWork applying it. Nil
	// otherwise.
	ProjectCopy *unstructured.Unstructured
}

// SpokeProject is the hub AppProject as it lands on the cluster, in the spoke Argo CD namespace
// under its own name: the spoke's Argo CD enforces it (which repositories, destinations and
// kinds the Application may use). Its sourceNamespaces are dropped: they name hub namespaces,
// and on the cluster every delivered Application is in the Argo CD namespace.
func SpokeProject(project *unstructured.Unstructured, namespace string) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetGroupVersionKind(pullmodel.AppProjectGVK)
	out.SetName(project.GetName())
	out.SetNamespace(namespace)
	out.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
	if spec, ok := project.Object["spec"].(map[string]any); ok {
		spec = runtime.DeepCopyJSON(spec)
		delete(spec, "sourceNamespaces")
		out.Object["spec"] = spec
	}
	return out
}

// SpokePlace is where the Application lands on the managed cluster: always in the spoke Argo
// CD namespace the operator configured, never in one the Application's author picks. An
// Application of the hub Argo CD namespace keeps its name; one of another namespace is named
// "<namespace>.<name>", so that Applications of two namespaces never meet on a cluster (a
// namespace name has no dot, so the two parts cannot be read two ways).
func SpokePlace(p Policy, app metav1.Object) types.NamespacedName {
	name := app.GetName()
	if app.GetNamespace() != p.ArgoCDNamespace {
		name = app.GetNamespace() + "." + name
	}
	return types.NamespacedName{Namespace: p.SpokeNamespace, Name: name}
}

// dropAnnotations are the hub-only annotations the spoke Application does not get.
var dropAnnotations = map[string]bool{
	pullmodel.AnnotationCluster:           true,
	pullmodel.AnnotationAppNamespace:      true,
	pullmodel.AnnotationSkipReconcile:     true,
	pullmodel.AnnotationDestinationName:   true,
	pullmodel.AnnotationDestinationServer: true,
	// argocd-agent's own bookkeeping, never the spoke's.
	AnnotationAgentSourceUID: true,
	// kubectl's copy of the whole hub object would double the payload.
	"kubectl.kubernetes.io/last-applied-configuration": true,
}

// SpokeApplication is the Application the managed cluster's Argo CD gets: the hub
// Application's spec, operation, finalizers, labels and annotations, without the OCM keys and
// skip-reconcile, at place on the spoke, with the destination set for delivery on that
// cluster, marked for the cluster's resource reporter (resourcelist.LabelReported), and with
// its ApplicationSet's identity when one owns it.
func SpokeApplication(app *unstructured.Unstructured, at types.NamespacedName) *unstructured.Unstructured {
	out := pullmodel.NewApplication()
	out.SetName(at.Name)
	out.SetNamespace(at.Namespace)
	if f := app.GetFinalizers(); len(f) > 0 {
		out.SetFinalizers(f)
	}
	labels := map[string]string{}
	for k, v := range app.GetLabels() {
		if k != pullmodel.LabelPull {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	hub := app.GetAnnotations()
	for k, v := range hub {
		if !dropAnnotations[k] {
			annotations[k] = v
		}
	}
	labels[resourcelist.LabelReported] = "true"
	if set := pullmodel.OwningApplicationSet(app); set != "" {
		labels[pullmodel.LabelApplicationSet] = "true"
		annotations[pullmodel.AnnotationApplicationSet] = app.GetNamespace() + "/" + set
	}
	out.SetLabels(labels)
	if len(annotations) > 0 {
		out.SetAnnotations(annotations)
	}
	if spec, ok := app.Object["spec"].(map[string]any); ok {
		spec = runtime.DeepCopyJSON(spec)
		dest, _ := spec["destination"].(map[string]any)
		if dest == nil {
			dest = map[string]any{}
		}
		delete(dest, "name")
		delete(dest, "server")
		name, server := spokeCluster(app)
		if name != "" {
			dest["name"] = name
		}
		if server != "" {
			dest["server"] = server
		}
		spec["destination"] = dest
		out.Object["spec"] = spec
	}
	if op, ok := app.Object["operation"].(map[string]any); ok {
		out.Object["operation"] = runtime.DeepCopyJSON(op)
	}
	return out
}

// spokeCluster is the cluster a spoke Application deploys to (its destination's name and
// server; "" leaves one out): the one the hub Application's destination annotations name, else
// the spoke's own cluster. The hub Application's own destination names a cluster of the hub.
func spokeCluster(app *unstructured.Unstructured) (name, server string) {
	name, hasName := pullmodel.LookupAnnotation(app, pullmodel.AnnotationDestinationName)
	server, hasServer := pullmodel.LookupAnnotation(app, pullmodel.AnnotationDestinationServer)
	if !hasName && !hasServer {
		return "", pullmodel.InClusterServer
	}
	return name, server
}

// Build returns the ManifestWork of a hub Application in its cluster's namespace.
func Build(in Input) (*workv1.ManifestWork, error) {
	app := in.App
	at := in.Spoke
	if at.Name == "" {
		at = SpokePlace(DefaultPolicy(), app)
	}
	spoke := SpokeApplication(app, at)
	labels := map[string]string{pullmodel.LabelPull: "true"}
	annotations := map[string]string{
		pullmodel.AnnotationHubAppNamespace: app.GetNamespace(),
		pullmodel.AnnotationHubAppName:      app.GetName(),
	}
	if set := pullmodel.OwningApplicationSet(app); set != "" {
		labels[pullmodel.LabelApplicationSet] = "true"
		annotations[pullmodel.AnnotationApplicationSet] = app.GetNamespace() + "/" + set
	}
	if op, ok := spoke.Object["operation"].(map[string]any); ok {
		annotations[pullmodel.AnnotationOperationRequest] = in.OperationRequest
		spoke.Object["operation"] = named(op, in.OperationRequest)
	}
	_, refresh := pullmodel.LookupAnnotation(spoke, pullmodel.AnnotationRefresh)
	if refresh {
		annotations[pullmodel.AnnotationRefreshBaseline] = in.RefreshBaseline
	}
	paths := feedbackFor(app, spoke)
	raw, err := json.Marshal(spoke.Object)
	if err != nil {
		return nil, err
	}
	w := &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pullmodel.WorkName(app.GetName(), string(app.GetUID())),
			Namespace:   pullmodel.TargetCluster(app),
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{
					Group:     pullmodel.ArgoGroupVersion.Group,
					Resource:  "applications",
					Namespace: spoke.GetNamespace(),
					Name:      spoke.GetName(),
				},
				FeedbackRules:      []workv1.FeedbackRule{{Type: workv1.JSONPathsType, JsonPaths: paths}},
				FeedbackScrapeType: workv1.FeedbackPollType,
				UpdateStrategy: &workv1.UpdateStrategy{
					Type: workv1.UpdateStrategyTypeServerSideApply,
					ServerSideApply: &workv1.ServerSideApplyConfig{
						Force:        true,
						FieldManager: workv1.DefaultFieldManager,
						IgnoreFields: requestsRunOnce(),
					},
				},
			}},
		},
	}
	n := len(raw)
	if in.ProjectCopy != nil {
		praw, err := withProjectCopy(w, SpokeProject(in.ProjectCopy, at.Namespace))
		if err != nil {
			return nil, err
		}
		n += praw
	}
	if n > MaxWorkBytes {
		return w, &TooLargeError{Bytes: n}
	}
	return w, nil
}

// feedbackFor is what the ManifestWork of app, with spoke its spoke Application, feeds back:
// feedbackPaths, the error conditions by type, the resource list, and the reconcile time while
// a request is outstanding (see reconcileFeedback).
func feedbackFor(app, spoke *unstructured.Unstructured) []workv1.JsonPath {
	paths := slices.Concat(feedbackPaths, errorConditionPaths, []workv1.JsonPath{resourceListFeedback})
	_, refresh := pullmodel.LookupAnnotation(spoke, pullmodel.AnnotationRefresh)
	if _, op := spoke.Object["operation"]; op || refresh || reconcileAfterSyncPending(app) {
		paths = append(slices.Clip(paths), reconcileFeedback)
	}
	return paths
}

// withProjectCopy adds the Application's AppProject to w and returns its size (see
// Input.ProjectCopy). It is orphaned, as in the project's own ManifestWork, so that the work
// agent deletes it neither when it leaves this ManifestWork nor with it.
func withProjectCopy(w *workv1.ManifestWork, project *unstructured.Unstructured) (int, error) {
	praw, err := json.Marshal(project.Object)
	if err != nil {
		return 0, err
	}
	id := projectIdentifier(project)
	w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: praw}})
	w.Spec.ManifestConfigs = append(w.Spec.ManifestConfigs, workv1.ManifestConfigOption{ResourceIdentifier: id, FeedbackScrapeType: workv1.FeedbackPollType, UpdateStrategy: forcedApply()})
	w.Spec.DeleteOption = orphaned(id)
	return len(praw), nil
}

// TooLargeError says an Application, or the AppProject it names (What), does not fit into one
// ManifestWork.
type TooLargeError struct {
	What  string
	Bytes int
}

func (e *TooLargeError) Error() string {
	what := e.What
	if what == "" {
		what = "the Application"
	}
	return fmt.Sprintf("%s is %d KiB as JSON, more than the %d KiB one ManifestWork may carry", what, e.Bytes/1024, MaxWorkBytes/1024)
}

// NeedsUpdate reports whether have differs from want in anything the pull model sets: the
// spec, and its own labels and annotations (others' are left alone).
func NeedsUpdate(have, want *workv1.ManifestWork) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	for k, v := range want.Annotations {
		if got, ok := have.Annotations[k]; !ok || got != v {
			return true
		}
	}
	for _, k := range []string{pullmodel.LabelApplicationSet} {
		if _, ok := want.Labels[k]; !ok && have.Labels[k] != "" {
			return true
		}
	}
	for _, k := range []string{pullmodel.AnnotationApplicationSet, pullmodel.AnnotationOperationRequest, pullmodel.AnnotationOperationBaseline, pullmodel.AnnotationRefreshBaseline} {
		if _, ok := want.Annotations[k]; !ok {
			if _, has := have.Annotations[k]; has {
				return true
			}
		}
	}
	return !specEqual(have.Spec, want.Spec)
}

// specEqual compares two ManifestWork specs, the manifests by their JSON content (the API
// server may return them re-encoded).
func specEqual(a, b workv1.ManifestWorkSpec) bool {
	if len(a.Workload.Manifests) != len(b.Workload.Manifests) {
		return false
	}
	for i := range a.Workload.Manifests {
		if !jsonEqual(a.Workload.Manifests[i].Raw, b.Workload.Manifests[i].Raw) {
			return false
		}
	}
	a.Workload, b.Workload = workv1.ManifestsTemplate{}, workv1.ManifestsTemplate{}
	return equality.Semantic.DeepEqual(withDefaults(a), withDefaults(b))
}

// withDefaults fills in what the ManifestWork CRD defaults, so a stored spec and a built one
// compare equal (an older hub CRD without feedbackScrapeType prunes it: both sides agree then too).
// Build writes the defaults itself, so that neither side is copied in the common case.
func withDefaults(s workv1.ManifestWorkSpec) workv1.ManifestWorkSpec {
	if !lacksDefaults(s) {
		return s
	}
	// A copy first: a cached ManifestWork shares its feedback rules and update strategy with
	// every other (pullmodel.CompactWork).
	s = *s.DeepCopy()
	for i := range s.ManifestConfigs {
		c := &s.ManifestConfigs[i]
		if c.FeedbackScrapeType == "" {
			c.FeedbackScrapeType = workv1.FeedbackPollType
		}
		if u := c.UpdateStrategy; u != nil && u.ServerSideApply != nil {
			if u.ServerSideApply.FieldManager == "" {
				u.ServerSideApply.FieldManager = workv1.DefaultFieldManager
			}
		}
	}
	return s
}

// lacksDefaults reports whether withDefaults would change s.
func lacksDefaults(s workv1.ManifestWorkSpec) bool {
	for _, c := range s.ManifestConfigs {
		if c.FeedbackScrapeType == "" || (c.UpdateStrategy != nil && c.UpdateStrategy.ServerSideApply != nil && c.UpdateStrategy.ServerSideApply.FieldManager == "") {
			return true
		}
	}
	return false
}

// jsonEqual compares two JSON documents by content; the same bytes (the API server keeps a
// manifest as the manager wrote it) need no decoding.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return equality.Semantic.DeepEqual(x, y)
}

// Operation returns the sync request a ManifestWork carries, as the hub Application holds it
// (without the request's name), or nil.
func Operation(w *workv1.ManifestWork) map[string]any {
	if op := OperationAsSent(w); op != nil {
		return unnamed(op)
	}
	return nil
}

// OperationAsSent returns the sync request a ManifestWork carries, with the info entry that
// names it, or nil.
func OperationAsSent(w *workv1.ManifestWork) map[string]any {
	return sentRequests(w).Operation
}

// named returns op with an info entry naming the request (and no other entry of that name).
func named(op map[string]any, request string) map[string]any {
	out := unnamed(op)
	info, _ := out["info"].([]any)
	out["info"] = append(slices.Clip(info), map[string]any{"name": pullmodel.OperationRequestInfo, "value": request})
	return out
}

// unnamed returns a copy of op without the info entry that names the request; an info list
// left empty goes, as Argo CD omits an empty one.
func unnamed(op map[string]any) map[string]any {
	out := maps.Clone(op)
	info, _ := op["info"].([]any)
	keep := slices.DeleteFunc(slices.Clone(info), func(e any) bool { return isRequestName(e) })
	delete(out, "info")
	if len(keep) > 0 {
		out["info"] = keep
	}
	return out
}

// isRequestName reports whether an info entry is the one that names the request.
func isRequestName(e any) bool {
	m, ok := e.(map[string]any)
	return ok && m["name"] == pullmodel.OperationRequestInfo
}

// RequestName is the name an operation's info gives its request, "" if none.
func RequestName(op map[string]any) string {
	info, _ := op["info"].([]any)
	if i := slices.IndexFunc(info, isRequestName); i >= 0 {
		v, _ := info[i].(map[string]any)["value"].(string)
		return v
	}
	return ""
}

// SameOperation reports whether two sync requests are the same request, their names aside.
// They are compared as JSON values: read from the API server a request carries integers
// (RollingSync's retry.limit) where the same request decoded from a ManifestWork's payload
// carries floats.
func SameOperation(a, b map[string]any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, errA := json.Marshal(unnamed(a))
	y, errB := json.Marshal(unnamed(b))
	return errA == nil && errB == nil && jsonEqual(x, y)
}

// OperationCompleted reports whether an Argo CD operation phase is final (Argo CD's
// OperationPhase.Completed).
func OperationCompleted(phase string) bool {
	return phase == "Succeeded" || phase == "Failed" || phase == "Error"
}

// RunsSentRequest reports whether the operation fb (w's feedback) reports on is the run of the
// sync request w carries.
func RunsSentRequest(w *workv1.ManifestWork, fb map[string]string) bool {
	sent := w.Annotations[pullmodel.AnnotationOperationRequest]
	return sent != "" && fb[FeedbackOperationRequest] == sent
}

// OperationRun reports whether the spoke has run the sync request w carries: fb, w's feedback,
// shows that request's operation, finished. Until then the request stays on the hub, as Argo
// CD keeps an Application's operation until it has finished: an equal request sent while the
// spoke still runs this one would merge into it and never run.
func OperationRun(w *workv1.ManifestWork, fb map[string]string) bool {
	return RunsSentRequest(w, fb) && OperationCompleted(fb[FeedbackOperationPhase])
}

// OperationShown reports whether the hub Application's status already shows the finished
// operation fb reports, of a request the hub sent. The status controller writes that in the
// same patch that clears the request the operation ran; so once it shows, a request on the
// hub equal to the one w carries is a new request (RollingSync asking again), not the old one
// waiting to be cleared.
func OperationShown(app *unstructured.Unstructured, fb map[string]string) bool {
	// Read in place: this runs for every feedback change of every Application.
	shown, _, _ := unstructured.NestedFieldNoCopy(app.Object, "status", "operationState", "operation")
	phase, _, _ := unstructured.NestedString(app.Object, "status", "operationState", "phase")
	request := fb[FeedbackOperationRequest]
	op, _ := shown.(map[string]any)
	return request != "" && RequestName(op) == request && OperationCompleted(phase)
}

// Refresh returns the refresh request a ManifestWork carries, and whether it carries one.
func Refresh(w *workv1.ManifestWork) (string, bool) {
	v, ok := sentRequests(w).Metadata.Annotations[pullmodel.AnnotationRefresh].(string)
	return v, ok
}

// requests are the parts of a ManifestWork's Application manifest that carry the hub's
// requests: its sync request and its annotations.
type requests struct {
	Operation map[string]any `json:"operation"`
	Metadata  struct {
		Annotations map[string]any `json:"annotations"`
	} `json:"metadata"`
}

// sentRequests decodes the requests of a ManifestWork's Application manifest and skips the
// rest: the status controller reads them at each feedback change of every Application, and
// the whole manifest decoded was most of what that comparison allocated.
func sentRequests(w *workv1.ManifestWork) requests {
	var r requests
	if len(w.Spec.Workload.Manifests) == 0 {
		return r
	}
	// A field of another type is skipped and the rest still decoded, as the whole manifest
	// decoded into a map gave every other field.
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &r); err != nil && !errors.As(err, &typeErr) {
		return requests{}
	}
	return r
}

func payload(w *workv1.ManifestWork) map[string]any {
	if len(w.Spec.Workload.Manifests) == 0 {
		return nil
	}
	var app map[string]any
	if json.Unmarshal(w.Spec.Workload.Manifests[0].Raw, &app) != nil {
		return nil
	}
	return app
}
