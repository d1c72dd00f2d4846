package addonobjects

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// The components never go to a cluster unasked where an Argo CD the addon did not install runs
// (spoke.ReadProbe says why). The components addon installs by a Placement of the manager's
// that selects only ManagedClusters carrying the GitOpsCluster's clearance label
// (names.ComponentsClearedLabel), and the manager sets that label only on clusters of the
// user's Placement whose probe found nothing foreign, or on all of them with existingArgoCD
// Replace. A cluster that joins is not selected until its probe has answered, so nothing of
// Argo CD's is rendered there before; a cluster already running the components keeps them
// while its probe is recreated or the hub restarts (its answer would be the addon's own
// objects anyway).

// maxForeignListed bounds status.foreignArgoCD.
const maxForeignListed = 20

// ForeignReport is what the probes found, for the status.
type ForeignReport struct {
	// foreign are the clusters with another Argo CD, sorted, with what was found.
	foreign []v1alpha1.FoundArgoCD
	// probing counts clusters whose probe has not answered.
	probing int
	// otherVersion are the clusters keeping their own Argo CD whose application-controller
	// runs another release than the one the agent is built against.
	otherVersion []v1alpha1.FoundArgoCD
	// labelFailures are the clusters whose clearance label could not be changed.
	labelFailures []string
	// missingProbes are selected clusters without a probe; staleProbes the probes of clusters
	// no longer selected (see SyncProbes).
	missingProbes  []string
	staleProbes    []*workv1.ManifestWork
	outdatedProbes []*workv1.ManifestWork
}

// installNamespace is where the GitOpsCluster's agent and components go on each cluster.
func installNamespace(cfg config.Config, goc *v1alpha1.GitOpsCluster) string {
	if ns := goc.Spec.ArgoCDAgentAddon.AgentNamespace; ns != "" {
		return ns
	}
	return cfg.DefaultAgentNamespace
}

// ClearForComponents probes the selected clusters, sets the clearance label on those the
// components may go to, and reports the Argo CD of the clusters that keep their own when its
// version is not the one the agent is built against. With selected nil (selection unknown)
// nothing changes.
//
// With selectionPartial (the Placement is missing, being deleted, or its decision pages are
// mid-update) clusters are only added: no label is removed and no probe deleted on a
// selection that cannot be trusted to say who left.
func (p *Prober) ClearForComponents(ctx context.Context, goc *v1alpha1.GitOpsCluster, selected sets.Set[string], invalid map[string]string, selectionPartial bool) (ForeignReport, error) {
	var rep ForeignReport
	if selected == nil {
		return rep, nil
	}
	key := names.ComponentsClearedLabel(goc)
	seen, err := p.readClearance(ctx, goc, key)
	if err != nil {
		return rep, err
	}
	probes := seen.probes
	// The release compared with is the one the GitOpsCluster's own agent is built against.
	agentImage, err := AgentImage(ctx, p.Hub, goc, names.PrincipalNamespace(goc))
	if err != nil {
		return rep, err
	}
	paired := ""
	if imgs, err := spoke.ImagesFor(agentImage); err == nil {
		paired = spoke.ImageTag(imgs.ArgoCD)
	}
	install := componentsWanted(goc)
	replace := goc.Spec.ArgoCDAgentAddon.ExistingArgoCD == v1alpha1.ExistingArgoCDReplace
	components := config.ComponentsAddonName(p.Config.AddonName)
	cleared := sets.New[string]()
	var missing []string
	// The clusters with the components addon installed, read once and only when a cluster's
	// clearance depends on it (a probe not answered yet, or one that found these components).
	var installed sets.Set[string]
	// A probe that looks elsewhere than the components would go (the install namespace
	// changed, say) is replaced, and reads as unanswered meanwhile.
	installNS := installNamespace(p.Config, goc)
	for _, probe := range probes {
		if !spoke.ProbeCurrent(probe, installNS) {
			rep.outdatedProbes = append(rep.outdatedProbes, probe)
		}
	}
	for _, c := range sets.List(selected) {
		if invalid[c] != "" {
			// No agent goes to a cluster whose name cannot be an agent's, nor components.
			continue
		}
		probe := probes[c]
		delete(probes, c)
		if probe == nil {
			missing = append(missing, c)
		}
		if probe != nil && !spoke.ProbeCurrent(probe, installNS) {
			probe = nil // outdated: no answer yet
		}
		verdict, found := spoke.ReadProbe(probe, components)
		in := clearanceInput{install: install, ownArgoCD: seen.ownArgoCD.Has(c), replace: replace || seen.replace.Has(c), labelled: seen.labelled.Has(c), verdict: verdict}
		if img := spoke.ProbedControllerImage(probe); in.keepsItsOwn() && img != "" && paired != "" && spoke.ImageTag(img) != paired {
			rep.otherVersion = append(rep.otherVersion, v1alpha1.FoundArgoCD{Cluster: c,
				Found: truncateFound(fmt.Sprintf("Argo CD %s (%s); the agent is built against Argo CD %s", spoke.ImageTag(img), img, paired))})
		}
		// A cluster the hub admin labelled Replace is taken over as asked: not reported as
		// left alone (the condition's reason follows the GitOpsCluster's own choice).
		if in.install && !in.ownArgoCD && verdict == spoke.ProbeForeign && (replace || !seen.replace.Has(c)) {
			rep.foreign = append(rep.foreign, v1alpha1.FoundArgoCD{Cluster: c, Found: truncateFound(found)})
		}
		switch decideClearance(in) {
		case clearedNow:
			cleared.Insert(c)
		case clearedIfInstalled:
			if installed == nil {
				if installed, err = p.componentsInstalled(ctx); err != nil {
					return rep, err
				}
			}
			if installed.Has(c) {
				cleared.Insert(c)
			} else {
				rep.probing++
			}
		}
	}
	if selectionPartial {
		cleared = cleared.Union(seen.labelled)
		probes = nil
	}
	// Label changes first: a cluster leaves the components' Placement before anything else.
	// A cluster whose label cannot be written stays as it was; the others go on.
	rep.labelFailures = p.setClearance(ctx, key, seen.labelled, cleared)
	rep.missingProbes = missing
	for _, probe := range probes {
		rep.staleProbes = append(rep.staleProbes, probe)
	}
	return rep, nil
}

// clearanceSeen is what the hub holds about the components' clearance of a GitOpsCluster: its
// probes by cluster, the clusters that keep their own Argo CD by label, those whose own Argo CD
// is replaced by label, and those cleared now.
type clearanceSeen struct {
	probes    map[string]*workv1.ManifestWork
	ownArgoCD sets.Set[string]
	replace   sets.Set[string]
	labelled  sets.Set[string]
}

func (p *Prober) readClearance(ctx context.Context, goc *v1alpha1.GitOpsCluster, key string) (clearanceSeen, error) {
	seen := clearanceSeen{probes: map[string]*workv1.ManifestWork{}, ownArgoCD: sets.New[string](), replace: sets.New[string](), labelled: sets.New[string]()}
	// Read-only walks over the cache's own objects: a pass reads one probe and one
	// ManagedCluster per selected cluster, and copies of them all were most of its garbage.
	var probeList workv1.ManifestWorkList
	if err := p.Client.List(ctx, &probeList, client.UnsafeDisableDeepCopy, client.MatchingLabels{spoke.LabelProbe: names.ComponentsKey(goc)}); err != nil {
		return seen, err
	}
	for i := range probeList.Items {
		seen.probes[probeList.Items[i].Namespace] = &probeList.Items[i]
	}
	var optedOut clusterv1.ManagedClusterList
	if err := p.Client.List(ctx, &optedOut, client.UnsafeDisableDeepCopy, client.MatchingLabels{v1alpha1.LabelArgoCDComponents: string(v1alpha1.ArgoCDComponentsExisting)}); err != nil {
		return seen, err
	}
	for _, mc := range optedOut.Items {
		seen.ownArgoCD.Insert(mc.Name)
	}
	var replaced clusterv1.ManagedClusterList
	if err := p.Client.List(ctx, &replaced, client.UnsafeDisableDeepCopy, client.MatchingLabels{v1alpha1.LabelArgoCDComponents: v1alpha1.LabelValueReplace}); err != nil {
		return seen, err
	}
	for _, mc := range replaced.Items {
		seen.replace.Insert(mc.Name)
	}
	var current clusterv1.ManagedClusterList
	if err := p.Client.List(ctx, &current, client.UnsafeDisableDeepCopy, client.HasLabels{key}); err != nil {
		return seen, err
	}
	for _, mc := range current.Items {
		seen.labelled.Insert(mc.Name)
	}
	return seen, nil
}

// clearanceInput is what one cluster's clearance for the components is decided on.
type clearanceInput struct {
	install   bool // the GitOpsCluster installs the components
	ownArgoCD bool // the cluster is labelled to keep its own Argo CD
	replace   bool // existingArgoCD: Replace, or the cluster is labelled Replace
	labelled  bool // cleared now
	verdict   spoke.Verdict
}

// keepsItsOwn: the cluster runs an Argo CD the components do not replace.
func (in clearanceInput) keepsItsOwn() bool {
	return !in.install || in.ownArgoCD || in.verdict == spoke.ProbeForeign && !in.replace
}

type clearance int

const (
	notCleared clearance = iota
	clearedNow
	// clearedIfInstalled: the probe has not answered; the components already running there
	// (from before the probe) clear it, else it waits.
	clearedIfInstalled
)

// decideClearance is the rule for one cluster. A cluster already cleared keeps its label when
// an Argo CD not the components' is reported there (its components run there, and one report,
// an object's label edited say, must not uninstall them) or while its probe is recreated.
func decideClearance(in clearanceInput) clearance {
	switch {
	case !in.install || in.ownArgoCD:
		return notCleared
	case in.verdict == spoke.ProbeForeign:
		if in.replace || in.labelled {
			return clearedNow
		}
		return notCleared
	case in.verdict == spoke.ProbeClear, in.replace, in.labelled:
		return clearedNow
	default:
		return clearedIfInstalled
	}
}

// SyncProbes creates the probes the report found missing and deletes those of clusters no
// longer selected. It runs after the status is written: a custom resource costs the API server
// several times a Secret, and thousands of probe creations would otherwise hold a new fleet's
// Ready by seconds; their answers come later anyway, each waking the GitOpsCluster.
//
// It creates at most ProbesPerPass probes, none that an earlier pass created and the cache
// does not show yet (for at most 30 s), and reports whether more are missing or held back:
// the caller runs the next pass a second later.
func (p *Prober) SyncProbes(ctx context.Context, goc *v1alpha1.GitOpsCluster, rep ForeignReport) (more bool, err error) {
	batch := p.Config.ProbesPerPass
	if batch <= 0 {
		batch = config.DefaultProbesPerPass
	}
	missing, name := rep.missingProbes, names.ProbeWorkName(goc)
	if p.ProbesInFlight != nil {
		// A probe held back is looked for again at the next pass, which more asks for.
		missing, more = p.ProbesInFlight.holdBack(name, missing, time.Now())
	}
	if len(missing) > batch {
		missing, more = missing[:batch], true
	}
	// One cluster's probe failing (its namespace gone, say) holds only that cluster.
	parallel.Each(p.Config.WriteConcurrency, missing, func(c string) {
		created, err := p.createProbe(ctx, goc, c)
		if err != nil {
			log.FromContext(ctx).Error(err, "probing a cluster for an Argo CD", "cluster", c)
			return
		}
		// One that existed already is not on its way to the cache: if the cache does not
		// show it, waiting would not change that.
		if created && p.ProbesInFlight != nil {
			p.ProbesInFlight.add(name, c, time.Now())
		}
	})
	// An outdated probe is deleted, and the pass its deletion wakes creates it anew: probes are
	// never changed, so the manager needs no right to change ManifestWorks for them.
	gone := append(slices.Clone(rep.staleProbes), rep.outdatedProbes...)
	return more, writeAll(p.Config.WriteConcurrency, gone, func(probe *workv1.ManifestWork) error {
		// The cache's own object is not handed to the client.
		return client.IgnoreNotFound(p.Client.Delete(ctx, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: probe.Namespace, Name: probe.Name}}))
	})
}

// writeAll runs write for every item, a few at a time, and returns the first error.
func writeAll[T any](n int, items []T, write func(T) error) error {
	var mu sync.Mutex
	var first error
	parallel.Each(n, items, func(it T) {
		if err := write(it); err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	return first
}

// truncateFound keeps a finding within the status field's bound.
func truncateFound(s string) string {
	if len(s) <= 1024 {
		return s
	}
	return strings.ToValidUTF8(s[:1021], "") + "..."
}

// createProbe creates cluster's probe, and reports whether it did (false: it existed).
func (p *Prober) createProbe(ctx context.Context, goc *v1alpha1.GitOpsCluster, cluster string) (created bool, err error) {
	probe, err := spoke.BuildProbe(names.ProbeWorkName(goc), cluster, installNamespace(p.Config, goc), names.ComponentsKey(goc), names.OwnerLabels(goc))
	if err != nil {
		return false, err
	}
	switch err := p.Client.Create(ctx, probe); {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("creating the Argo CD probe in namespace %s: %w", cluster, err)
	}
	return true, nil
}

// componentsInstalled returns the clusters where the components addon is installed already
// (by an earlier version of the manager, or before the probe was recreated) and not being
// removed. It is one read-only walk over the components addon's cache: a pass that asked it
// cluster by cluster made a copy of each cluster's addon, or an error for each cluster
// without one, thousands per pass on a large fleet whose probes have not answered yet.
func (p *Prober) componentsInstalled(ctx context.Context) (sets.Set[string], error) {
	out := sets.New[string]()
	if p.ComponentsAddOns == nil {
		return out, nil
	}
	var mcas addonv1alpha1.ManagedClusterAddOnList
	if err := p.ComponentsAddOns.List(ctx, &mcas, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	components := config.ComponentsAddonName(p.Config.AddonName)
	for i := range mcas.Items {
		if mca := &mcas.Items[i]; mca.Name == components && mca.DeletionTimestamp == nil {
			out.Insert(mca.Namespace)
		}
	}
	return out, nil
}

// setClearance makes the label key present exactly on the clusters in want, removals first,
// and returns the clusters whose label could not be changed (each logged).
func (p *Prober) setClearance(ctx context.Context, key string, have, want sets.Set[string]) []string {
	var mu sync.Mutex
	var failed []string
	patch := func(value *string) func(string) {
		return func(c string) {
			if err := p.patchClusterLabel(ctx, c, key, value); err != nil {
				log.FromContext(ctx).Error(err, "clearing a cluster for the Argo CD components", "cluster", c)
				mu.Lock()
				failed = append(failed, c)
				mu.Unlock()
			}
		}
	}
	parallel.Each(p.Config.WriteConcurrency, sets.List(have.Difference(want)), patch(nil))
	value := "true"
	parallel.Each(p.Config.WriteConcurrency, sets.List(want.Difference(have)), patch(&value))
	slices.Sort(failed)
	return failed
}

// DropClearance removes the GitOpsCluster's clearance label from every ManagedCluster.
func (p *Prober) DropClearance(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	key := names.ComponentsClearedLabel(goc)
	var current clusterv1.ManagedClusterList
	if err := p.Client.List(ctx, &current, client.HasLabels{key}); err != nil {
		return err
	}
	return writeAll(p.Config.WriteConcurrency, current.Items, func(mc clusterv1.ManagedCluster) error {
		return p.patchClusterLabel(ctx, mc.Name, key, nil)
	})
}

// DeleteProbes deletes every probe of the GitOpsCluster (it is going).
func (p *Prober) DeleteProbes(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	var list workv1.ManifestWorkList
	if err := p.Client.List(ctx, &list, client.MatchingLabels{spoke.LabelProbe: names.ComponentsKey(goc)}); err != nil {
		return err
	}
	probes := list.Items
	// A probe created just before and not in the cache yet is deleted by name.
	if p.ProbesInFlight != nil {
		name := names.ProbeWorkName(goc)
		listed := sets.New[string]()
		for _, probe := range list.Items {
			listed.Insert(probe.Namespace)
		}
		for _, c := range p.ProbesInFlight.Forget(name) {
			if !listed.Has(c) {
				probes = append(probes, workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: name}})
			}
		}
	}
	return writeAll(p.Config.WriteConcurrency, probes, func(probe workv1.ManifestWork) error {
		return client.IgnoreNotFound(p.Client.Delete(ctx, &probe))
	})
}

// ClearanceError is the failed clearance label writes of this pass as an error, nil when every
// one was written: the pass returns it so that the controller retries them with its backoff,
// as it would any other failed write.
func (rep ForeignReport) ClearanceError() error {
	if len(rep.labelFailures) == 0 {
		return nil
	}
	return fmt.Errorf("the clearance label of %d cluster(s) could not be changed (first: %s)", len(rep.labelFailures), rep.labelFailures[0])
}

// patchClusterLabel sets (value non-nil) or removes one label of a ManagedCluster with a merge
// patch, which touches nothing else of it.
func (p *Prober) patchClusterLabel(ctx context.Context, cluster, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if err != nil {
		return err
	}
	mc := &clusterv1.ManagedCluster{}
	mc.Name = cluster
	if err := p.Client.Patch(ctx, mc, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("labelling ManagedCluster %s: %w", cluster, err)
	}
	return nil
}

// ReportForeign writes the probes' findings into the status and the ForeignArgoCDFound
// condition, and returns the Events they call for: when the set of such clusters grows, and
// when clearance labels could not be changed.
func (p *Prober) ReportForeign(goc *v1alpha1.GitOpsCluster, status *v1alpha1.GitOpsClusterStatus, rep ForeignReport, setCond func(string, bool, string, string)) []config.Event {
	var events []config.Event
	status.ForeignArgoCDClusters = int32(len(rep.foreign))
	status.ProbingClusters = int32(rep.probing)
	listed := rep.foreign
	if len(listed) > maxForeignListed {
		listed = listed[:maxForeignListed]
	}
	status.ForeignArgoCD = slices.Clone(listed)
	status.OtherArgoCDVersionClusters = int32(len(rep.otherVersion))
	status.OtherArgoCDVersions = slices.Clone(rep.otherVersion[:min(len(rep.otherVersion), maxForeignListed)])
	if len(rep.otherVersion) > int(goc.Status.OtherArgoCDVersionClusters) {
		events = append(events, config.Warning("ArgoCDVersionSkew", "ProbeClusters",
			"%d selected cluster(s) keep their own Argo CD at another release than the agent's (first: %s: %s)", len(rep.otherVersion), rep.otherVersion[0].Cluster, rep.otherVersion[0].Found))
	}
	if n := len(rep.labelFailures); n > 0 {
		events = append(events, config.Warning("ClearanceFailed", "ProbeClusters",
			"the clearance label of %d cluster(s) could not be changed (first: %s); they keep their components as they are", n, rep.labelFailures[0]))
	}
	if len(rep.foreign) == 0 {
		setCond(v1alpha1.ConditionForeignArgoCD, false, v1alpha1.ReasonNoForeignArgoCD, "no selected cluster runs an Argo CD the addon did not install")
		return events
	}
	clusters := make([]string, 0, len(listed))
	for _, f := range listed {
		clusters = append(clusters, f.Cluster)
	}
	list := strings.Join(clusters, ", ")
	if len(rep.foreign) > len(listed) {
		list += fmt.Sprintf(" and %d more", len(rep.foreign)-len(listed))
	}
	reason, msg := v1alpha1.ReasonForeignArgoCDLeftAlone, fmt.Sprintf("%d selected cluster(s) run an Argo CD the addon did not install and get no Argo CD components (existingArgoCD: LeaveAlone): %s; for each, label its ManagedCluster %s=Existing to use that Argo CD, or =Replace to take it over (existingArgoCD: Replace takes them all over)",
		len(rep.foreign), list, v1alpha1.LabelArgoCDComponents)
	if goc.Spec.ArgoCDAgentAddon.ExistingArgoCD == v1alpha1.ExistingArgoCDReplace {
		reason, msg = v1alpha1.ReasonForeignArgoCDReplaced, fmt.Sprintf("%d selected cluster(s) ran an Argo CD the addon did not install, replaced as existingArgoCD: Replace asks: %s", len(rep.foreign), list)
	}
	if prev := goc.Status.ForeignArgoCDClusters; int(prev) < len(rep.foreign) || !equality.Semantic.DeepEqual(goc.Status.ForeignArgoCD, status.ForeignArgoCD) && int(prev) == 0 {
		events = append(events, config.Warning("ForeignArgoCDFound", "ProbeClusters", "%s", msg))
	}
	setCond(v1alpha1.ConditionForeignArgoCD, true, reason, msg)
	return events
}
