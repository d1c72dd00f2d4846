package pulltest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// WorkAgent plays OCM's work agent (v1.2.1) for the AppProjects the pull model delivers. For
// every ManifestWork that carries AppProjects and no Application it reports them applied, as
// the agent does once it has applied them (the work's and each manifest's Applied condition).
// On the clusters it has a spoke for, it also applies the AppProjects of every pull-model
// ManifestWork there, under OCM's ownership rules (helper.OwnedByTheWork and
// helper.DeleteAppliedResources): an AppProject a ManifestWork does not orphan is owned by it;
// one it no longer carries, or that of a deleted ManifestWork, is deleted only when that
// ManifestWork owned it and no other does; an orphaned one is never deleted. Ownership is kept in
// an annotation rather than owner references, which only a garbage collector would read.
type WorkAgent struct {
	c client.Client
	// spokes are the clusters whose AppProjects are applied, into namespace SpokeNamespace.
	spokes map[string]bool
	// down are clusters whose agent does not run (nothing is applied or reported there).
	down sync.Map
	// paused stops every write while set.
	paused atomic.Bool

	mu sync.Mutex
	// applied is, per ManifestWork UID, what it applied (OCM's AppliedManifestWork).
	applied map[string]map[spokeRef]bool
	// deleted lists the spoke objects the agent deleted.
	deleted []string
}

// spokeRef is an AppProject on a cluster, at its place in the ManifestWork's namespace terms.
type spokeRef struct{ cluster, namespace, name string }

// ownersAnnotation holds the UIDs of the ManifestWorks that own a spoke object.
const ownersAnnotation = "test.pullmodel/owners"

// workCleanupFinalizer is the finalizer OCM's work agent puts on the ManifestWorks it applies.
const workCleanupFinalizer = "cluster.open-cluster-management.io/manifest-work-cleanup"

// StartWorkAgent runs a work agent against c until ctx ends, with a spoke for each cluster of
// spokes. The Applications' own ManifestWorks get their status from each test (SetFeedback).
func StartWorkAgent(ctx context.Context, c client.Client, spokes ...string) *WorkAgent {
	a := &WorkAgent{c: c, spokes: map[string]bool{}, applied: map[string]map[spokeRef]bool{}}
	for _, s := range spokes {
		a.spokes[s] = true
	}
	go func() {
		for ctx.Err() == nil {
			if !a.paused.Load() {
				_ = a.round(ctx)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return a
}

// SpokeNamespace is where the agent of cluster puts what a ManifestWork places in namespace:
// the test's API server stands in for every cluster.
func SpokeNamespace(cluster, namespace string) string { return cluster + "--" + namespace }

// SetDown stops (or restarts) the agent of cluster.
func (a *WorkAgent) SetDown(cluster string, down bool) {
	if down {
		a.down.Store(cluster, true)
	} else {
		a.down.Delete(cluster)
	}
}

// Deletions returns the spoke objects the agent deleted so far.
func (a *WorkAgent) Deletions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.deleted)
}

// SetPaused stops every write of the agent while paused, so that a benchmark measures the
// manager's writes alone.
func (a *WorkAgent) SetPaused(paused bool) { a.paused.Store(paused) }

func (a *WorkAgent) round(ctx context.Context) error {
	list := &workv1.ManifestWorkList{}
	if err := a.c.List(ctx, list, client.HasLabels{pullmodel.LabelProjectWork}); err != nil {
		return err
	}
	for s := range a.spokes {
		all := &workv1.ManifestWorkList{}
		if err := a.c.List(ctx, all, client.InNamespace(s), client.HasLabels{pullmodel.LabelPull}); err != nil {
			return err
		}
		for _, w := range all.Items {
			if !slices.ContainsFunc(list.Items, func(o workv1.ManifestWork) bool { return o.UID == w.UID }) {
				list.Items = append(list.Items, w)
			}
		}
	}
	for i := range list.Items {
		w := &list.Items[i]
		if _, down := a.down.Load(w.Namespace); down {
			continue
		}
		if a.spokes[w.Namespace] {
			if err := a.applySpoke(ctx, w); err != nil {
				return err
			}
			if w.DeletionTimestamp != nil {
				continue
			}
		}
		if projects, apps := ManifestKinds(w); len(projects) > 0 && apps == 0 {
			if err := a.reportApplied(ctx, w, projects); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// ManifestKinds returns the AppProjects a ManifestWork carries, and how many Applications.
func ManifestKinds(w *workv1.ManifestWork) ([]*unstructured.Unstructured, int) {
	var projects []*unstructured.Unstructured
	apps := 0
	for _, m := range w.Spec.Workload.Manifests {
		u := &unstructured.Unstructured{}
		if json.Unmarshal(m.Raw, &u.Object) != nil {
			continue
		}
		switch u.GetKind() {
		case "AppProject":
			projects = append(projects, u)
		case "Application":
			apps++
		}
	}
	return projects, apps
}

// reportApplied writes the status OCM's agent writes once it has applied every manifest,
// unless the ManifestWork already shows it for its generation.
func (a *WorkAgent) reportApplied(ctx context.Context, w *workv1.ManifestWork, projects []*unstructured.Unstructured) error {
	if c := apimeta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == w.Generation &&
		len(w.Status.ResourceStatus.Manifests) == len(projects) {
		return nil
	}
	var manifests []workv1.ManifestCondition
	for i, p := range projects {
		manifests = append(manifests, workv1.ManifestCondition{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: int32(i), Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject", Resource: "appprojects", Namespace: p.GetNamespace(), Name: p.GetName()},
			Conditions:   []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestComplete", Message: "Apply manifest complete", LastTransitionTime: metav1.Now()}},
		})
	}
	w = w.DeepCopy()
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", Message: "Apply manifest work complete", ObservedGeneration: w.Generation, LastTransitionTime: metav1.Now()}}
	w.Status.ResourceStatus.Manifests = manifests
	return a.c.Status().Update(ctx, w)
}

// applySpoke applies a ManifestWork's AppProjects on its cluster, removes those it no longer
// carries, and, once it is deleted, what it owned, then lets it go.
func (a *WorkAgent) applySpoke(ctx context.Context, w *workv1.ManifestWork) error {
	uid := string(w.UID)
	if w.DeletionTimestamp != nil {
		if !slices.Contains(w.Finalizers, workCleanupFinalizer) {
			return nil
		}
		a.mu.Lock()
		refs := a.applied[uid]
		a.mu.Unlock()
		for ref := range refs {
			if err := a.release(ctx, ref, uid); err != nil {
				return err
			}
		}
		a.mu.Lock()
		delete(a.applied, uid)
		a.mu.Unlock()
		w = w.DeepCopy()
		w.Finalizers = slices.DeleteFunc(w.Finalizers, func(f string) bool { return f == workCleanupFinalizer })
		return client.IgnoreNotFound(a.c.Update(ctx, w))
	}
	if !slices.Contains(w.Finalizers, workCleanupFinalizer) {
		upd := w.DeepCopy()
		upd.Finalizers = append(upd.Finalizers, workCleanupFinalizer)
		// The agent applies nothing until its finalizer is on (OCM's add-finalizer controller).
		return client.IgnoreNotFound(a.c.Update(ctx, upd))
	}
	projects, _ := ManifestKinds(w)
	now := map[spokeRef]bool{}
	for _, p := range projects {
		ref := spokeRef{w.Namespace, p.GetNamespace(), p.GetName()}
		now[ref] = true
		if err := a.apply(ctx, ref, p, uid, OwnedByTheWork(w, p)); err != nil {
			return err
		}
	}
	a.mu.Lock()
	before := a.applied[uid]
	a.applied[uid] = now
	a.mu.Unlock()
	for ref := range before {
		if !now[ref] {
			if err := a.release(ctx, ref, uid); err != nil {
				return err
			}
		}
	}
	return nil
}

// OwnedByTheWork is OCM's rule: a manifest is owned unless the delete option orphans it.
func OwnedByTheWork(w *workv1.ManifestWork, p *unstructured.Unstructured) bool {
	o := w.Spec.DeleteOption
	switch {
	case o == nil || o.PropagationPolicy == workv1.DeletePropagationPolicyTypeForeground:
		return true
	case o.PropagationPolicy == workv1.DeletePropagationPolicyTypeOrphan:
		return false
	case o.SelectivelyOrphan == nil:
		return true
	}
	for _, r := range o.SelectivelyOrphan.OrphaningRules {
		if r.Group == "argoproj.io" && r.Resource == "appprojects" && r.Namespace == p.GetNamespace() && r.Name == p.GetName() {
			return false
		}
	}
	return true
}

func owners(u *unstructured.Unstructured) []string {
	v := u.GetAnnotations()[ownersAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func setOwners(u *unstructured.Unstructured, uids []string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if len(uids) == 0 {
		delete(a, ownersAnnotation)
	} else {
		a[ownersAnnotation] = strings.Join(uids, ",")
	}
	u.SetAnnotations(a)
}

// apply creates or updates the AppProject on the spoke (the ManifestWork's copy wins, as with a
// forced server-side apply), owned by the ManifestWork or not.
func (a *WorkAgent) apply(ctx context.Context, ref spokeRef, p *unstructured.Unstructured, uid string, owned bool) error {
	ns := SpokeNamespace(ref.cluster, ref.namespace)
	if err := a.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(pullmodel.AppProjectGVK)
	err := a.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.name}, cur)
	if apierrors.IsNotFound(err) {
		n := &unstructured.Unstructured{Object: map[string]any{"spec": p.Object["spec"]}}
		n.SetGroupVersionKind(pullmodel.AppProjectGVK)
		n.SetNamespace(ns)
		n.SetName(ref.name)
		n.SetLabels(p.GetLabels())
		if owned {
			setOwners(n, []string{uid})
		}
		return a.c.Create(ctx, n)
	}
	if err != nil {
		return err
	}
	if cur.GetDeletionTimestamp() != nil {
		return fmt.Errorf("spoke AppProject %s/%s is being deleted", ns, ref.name)
	}
	list := owners(cur)
	has := slices.Contains(list, uid)
	switch {
	case owned && !has:
		list = append(list, uid)
	case !owned && has:
		list = slices.DeleteFunc(list, func(s string) bool { return s == uid })
	}
	if fmt.Sprint(cur.Object["spec"]) == fmt.Sprint(p.Object["spec"]) && has == owned {
		return nil
	}
	cur.Object["spec"] = p.Object["spec"]
	setOwners(cur, list)
	return a.c.Update(ctx, cur)
}

// release is OCM's DeleteAppliedResources for one object a ManifestWork no longer applies.
func (a *WorkAgent) release(ctx context.Context, ref spokeRef, uid string) error {
	ns := SpokeNamespace(ref.cluster, ref.namespace)
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(pullmodel.AppProjectGVK)
	if err := a.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.name}, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	list := owners(cur)
	if !slices.Contains(list, uid) {
		return nil
	}
	if len(list) > 1 {
		setOwners(cur, slices.DeleteFunc(list, func(s string) bool { return s == uid }))
		return a.c.Update(ctx, cur)
	}
	a.mu.Lock()
	a.deleted = append(a.deleted, ns+"/"+ref.name)
	a.mu.Unlock()
	return client.IgnoreNotFound(a.c.Delete(ctx, cur))
}
