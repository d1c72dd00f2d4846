package gitopscluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// useRolloutHub points the suite's fixtures, for the rest of the test, at a hub of its own on
// which a manager built like the binary's and OCM's addon-manager both run: OCM then drives the
// rollout of every ManagedClusterAddOn there, which it would also do to the other tests' objects
// on the suite's hub. The test stands in for the clusters' work agents (applyAgentWork).
func useRolloutHub(t *testing.T) {
	t.Helper()
	bin := ocmBinaries(t)
	hub := testenv.StartForTest(t, testenv.Options{})
	suiteClient := k8s
	k8s = hub.Client
	t.Cleanup(func() { k8s = suiteClient })
	opts := manager.DefaultOptions()
	opts.Fleet = testConfig()
	stop, err := testenv.StartManager(hub.Config, hub.Client.Scheme(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	const hubNS = "open-cluster-management-hub"
	createNamespace(t, hubNS)
	kubeconfig, err := hub.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	startOCMProcess(t, filepath.Join(bin, "addon"), "manager", "--kubeconfig="+kubeconfig, "--namespace="+hubNS, "--disable-leader-election")
}

// agentWork is the agent addon's ManifestWork on cluster, as OCM's addon-manager renders it.
func agentWork(cluster string) (*workv1.ManifestWork, error) {
	var works workv1.ManifestWorkList
	if err := k8s.List(context.Background(), &works, client.InNamespace(cluster), client.MatchingLabels{addonv1alpha1.AddonLabelKey: addonName}); err != nil {
		return nil, err
	}
	if len(works.Items) != 1 {
		return nil, fmt.Errorf("%s: %d agent ManifestWorks", cluster, len(works.Items))
	}
	return &works.Items[0], nil
}

// workAgentImage is the image of the agent Deployment a ManifestWork carries.
func workAgentImage(w *workv1.ManifestWork) string {
	for _, m := range w.Spec.Workload.Manifests {
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(m.Raw); err != nil || o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if img, _ := c.(map[string]any)["image"].(string); strings.Contains(img, "argocd-agent") {
				return img
			}
		}
	}
	return ""
}

// applyAgentWork does what cluster's work agent does once the agent Deployment of image runs
// there: it reports the agent ManifestWork applied and available, with the Deployments' ready
// replicas OCM's health check reads.
func applyAgentWork(t *testing.T, cluster, image string) {
	t.Helper()
	var w *workv1.ManifestWork
	eventually(t, cluster+"'s agent work runs "+image, func() (err error) {
		if w, err = agentWork(cluster); err != nil {
			return err
		}
		if got := workAgentImage(w); got != image {
			return fmt.Errorf("agent image %q", got)
		}
		return nil
	})
	now := metav1.Now()
	w.Status.Conditions = []metav1.Condition{
		{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: w.Generation, LastTransitionTime: now},
		{Type: workv1.WorkAvailable, Status: metav1.ConditionTrue, Reason: "ResourcesAvailable", ObservedGeneration: w.Generation, LastTransitionTime: now},
	}
	w.Status.ResourceStatus.Manifests = nil
	for i, m := range w.Spec.Workload.Manifests {
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(m.Raw); err != nil {
			t.Fatal(err)
		}
		mc := workv1.ManifestCondition{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: int32(i), Group: o.GroupVersionKind().Group, Version: o.GroupVersionKind().Version,
				Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()},
			Conditions: []metav1.Condition{{Type: workv1.ManifestAvailable, Status: metav1.ConditionTrue, Reason: "ResourceAvailable", ObservedGeneration: w.Generation, LastTransitionTime: now}},
		}
		if o.GetKind() == "Deployment" {
			mc.ResourceMeta.Resource = "deployments"
			for _, f := range []string{"ReadyReplicas", "Replicas", "AvailableReplicas"} {
				mc.StatusFeedbacks.Values = append(mc.StatusFeedbacks.Values, workv1.FeedbackValue{Name: f, Value: workv1.FieldValue{Type: workv1.Integer, Integer: ptr.To[int64](1)}})
			}
		}
		w.Status.ResourceStatus.Manifests = append(w.Status.ResourceStatus.Manifests, mc)
	}
	if err := k8s.Status().Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

// configRefs are the desired and last applied AddOnDeploymentConfig of cluster's agent addon
// as OCM reports them ("" for none), and its template's last applied spec hash.
func configRefs(cluster string) (desired, applied, templateHash string, err error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err = k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: addonName}, mca); err != nil {
		return "", "", "", err
	}
	for _, r := range mca.Status.ConfigReferences {
		switch r.Resource {
		case addon.ResourceAddOnDeploymentConfigs:
			if r.DesiredConfig != nil {
				desired = r.DesiredConfig.Name
			}
			if r.LastAppliedConfig != nil {
				applied = r.LastAppliedConfig.Name
			}
		case addon.ResourceAddOnTemplates:
			if r.LastAppliedConfig != nil {
				templateHash = shortHash(r.LastAppliedConfig.SpecHash)
			}
		}
	}
	return desired, applied, templateHash, nil
}

func shortHash(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// timeline records, from the hub's objects, every change of what a version move is made of:
// the principal's image, the GitOpsCluster's config and what its status says, and for each
// cluster the config OCM hands it (desired), the one it reports applied and the image its
// agent ManifestWork carries.
type timeline struct {
	mu     sync.Mutex
	start  time.Time
	last   map[string]string
	lines  []string
	images map[string]string // config name → "agent <tag>, Argo CD <tag>"; pruned configs keep theirs
}

func (tl *timeline) configLabel(ctx context.Context, ns, name string) string {
	if name == "" {
		return "-"
	}
	if l, ok := tl.images[name]; ok {
		return name + " (" + l + ")"
	}
	adc := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, adc); err != nil {
		return name
	}
	tl.images[name] = "agent " + tagOf(addon.Variable(adc, addon.VarAgentImage)) + ", Argo CD " + tagOf(addon.Variable(adc, addon.VarArgoCDImage))
	return name + " (" + tl.images[name] + ")"
}

func tagOf(image string) string { return image[strings.LastIndex(image, ":")+1:] }

func (tl *timeline) observe(ctx context.Context, ns, name string, clusters []string) {
	now := map[string]string{}
	dep := &appsv1.Deployment{}
	if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "argocd-agent-principal"}, dep) == nil {
		now["principal image"] = tagOf(dep.Spec.Template.Spec.Containers[0].Image)
	}
	g := &v1alpha1.GitOpsCluster{}
	if k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, g) == nil {
		now["config written"] = tl.configLabel(ctx, ns, g.Status.AddOnDeploymentConfig)
		now["agentsOnOtherVersion"] = fmt.Sprint(g.Status.AgentsOnOtherVersion)
		for _, ct := range []string{v1alpha1.ConditionAddOnConfigured, v1alpha1.ConditionAgentsAvailable, v1alpha1.ConditionReady} {
			if c := meta.FindStatusCondition(g.Status.Conditions, ct); c != nil {
				now[ct] = fmt.Sprintf("%s %s", c.Status, c.Reason)
				if ct != v1alpha1.ConditionAddOnConfigured {
					now[ct] += ": " + c.Message
				}
			}
		}
	}
	for _, c := range clusters {
		if desired, applied, tplHash, err := configRefs(c); err == nil {
			now[c+" desired"] = tl.configLabel(ctx, ns, desired)
			now[c+" last applied"] = tl.configLabel(ctx, ns, applied) + ", template " + tplHash
		}
		if w, err := agentWork(c); err == nil {
			now[c+" work's agent image"] = tagOf(workAgentImage(w))
		}
	}
	keys := make([]string, 0, len(now))
	for k := range now {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, k := range keys {
		if tl.last[k] != now[k] {
			tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs  %-28s %s", time.Since(tl.start).Seconds(), k, now[k]))
			tl.last[k] = now[k]
		}
	}
}

func (tl *timeline) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

// recordTimeline polls the hub until the test ends and logs what changed, in order.
func recordTimeline(t *testing.T, ns, name string, clusters []string) *timeline {
	tl := &timeline{start: time.Now(), last: map[string]string{}, images: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			tl.observe(ctx, ns, name, clusters)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		t.Logf("timeline:\n%s", tl)
	})
	return tl
}

// setPrincipalImage changes the principal Deployment's image, as a user upgrading it would.
func setPrincipalImage(t *testing.T, ns, image string) {
	t.Helper()
	dep := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "argocd-agent-principal"}, dep); err != nil {
		t.Fatal(err)
	}
	base := dep.DeepCopy()
	dep.Spec.Template.Spec.Containers[0].Image = image
	if err := k8s.Patch(context.Background(), dep, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// configFor waits for the GitOpsCluster's config to name agent release agent and Argo CD argoCD,
// and returns its name.
func configFor(t *testing.T, ns, name string, pair version.Pair) string {
	t.Helper()
	var cfg string
	eventually(t, fmt.Sprintf("a config of agent %s and Argo CD %s", pair.Agent, pair.ArgoCD), func() error {
		cfg = getGOC(t, ns, name).Status.AddOnDeploymentConfig
		if cfg == "" {
			return fmt.Errorf("no config yet")
		}
		vars := adcVariables(t, ns, cfg)
		if vars[addon.VarAgentImage] != agentRepo+pair.Agent || vars[addon.VarArgoCDImage] != "quay.io/argoproj/argocd:"+pair.ArgoCD {
			return fmt.Errorf("config %s: agent %s, Argo CD %s", cfg, vars[addon.VarAgentImage], vars[addon.VarArgoCDImage])
		}
		return nil
	})
	return cfg
}

// handedNow returns the clusters, not yet moved, to which OCM hands cfg.
func handedNow(cfg string, clusters []string, moved map[string]bool) ([]string, error) {
	var handed []string
	for _, c := range clusters {
		ok, err := handedTo(c, cfg)
		if err != nil {
			return nil, err
		}
		if ok && !moved[c] {
			handed = append(handed, c)
		}
	}
	return handed, nil
}

// handedTo reports whether OCM has handed cfg to cluster's agent addon for good: Configured is
// True and every desired config carries its spec hash. OCM lists a new config before it has
// hashed it, and in that moment names it, unhashed, as desired on clusters that it then takes
// back (Configured False, the name kept) and renders no work for; a test that counted those
// would wait for a work OCM holds back on purpose.
func handedTo(cluster, cfg string) (bool, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: addonName}, mca); err != nil {
		return false, err
	}
	if !meta.IsStatusConditionTrue(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionConfigured) {
		return false, nil
	}
	named := false
	for _, r := range mca.Status.ConfigReferences {
		if r.DesiredConfig == nil || r.DesiredConfig.SpecHash == "" {
			return false, nil
		}
		if r.Resource == addon.ResourceAddOnDeploymentConfigs && r.DesiredConfig.Name == cfg {
			named = true
		}
	}
	return named, nil
}

// settledGroup returns the clusters handed cfg once that set has stayed the same for a second:
// OCM holds the others back until these are done.
func settledGroup(t *testing.T, cfg string, clusters []string, moved map[string]bool, group []string) []string {
	t.Helper()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(poll.Interval) {
		now, err := handedNow(cfg, clusters, moved)
		if err != nil {
			t.Fatal(err)
		}
		if len(now) > len(group) {
			t.Logf("OCM hands %s to %v while %v are in flight", cfg, now, group)
			group, end = now, time.Now().Add(time.Second)
		}
	}
	return group
}

// nextWithWork waits for one of clusters to have its agent ManifestWork run image, and returns it.
func nextWithWork(t *testing.T, clusters []string, image string) string {
	t.Helper()
	var next string
	poll.Until(t, fmt.Sprintf("an agent work running %s on one of %v", image, clusters), time.Minute, func() error {
		for _, c := range clusters {
			if w, err := agentWork(c); err == nil && workAgentImage(w) == image {
				next = c
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	return next
}

// rollOut plays the clusters' work agents while OCM rolls cfg out with maxConcurrency 1: it
// waits for OCM to hand cfg on, lets the hand-over settle for a second, applies cfg on the
// clusters in flight and waits for them to report it applied, and returns the groups in the
// order OCM moved them. While a group is in flight, check is given the number of clusters OCM
// has not handed cfg yet.
//
// A group may still hold more than one cluster: OCM counts a cluster against maxConcurrency
// only when it sorts before the next one to start. The strategy shows in OCM holding the rest
// back, and the fleet moving in more than one group.
func rollOut(t *testing.T, ns, name, cfg, image string, clusters []string, check func(left int)) [][]string {
	t.Helper()
	var order [][]string
	moved := map[string]bool{}
	for len(moved) < len(clusters) {
		var group []string
		poll.Until(t, "OCM hands "+cfg+" to the next cluster", time.Minute, func() (err error) {
			if group, err = handedNow(cfg, clusters, moved); err == nil && len(group) == 0 {
				err = fmt.Errorf("no cluster is given %s", cfg)
			}
			return err
		})
		group = settledGroup(t, cfg, clusters, moved, group)
		if len(group) > 1 {
			t.Logf("OCM moves %v together", group)
		}
		check(len(clusters) - len(moved) - len(group))
		// OCM may have named cfg as desired for a cluster whose work it writes only once the
		// others are done: the clusters move in the order their work comes.
		for remaining := slices.Clone(group); len(remaining) > 0; {
			next := nextWithWork(t, remaining, image)
			applyAgentWork(t, next, image)
			eventually(t, next+" reports "+cfg+" applied", func() error {
				if _, applied, _, err := configRefs(next); err != nil || applied != cfg {
					return fmt.Errorf("last applied %q (%v)", applied, err)
				}
				return nil
			})
			moved[next] = true
			remaining = slices.DeleteFunc(remaining, func(c string) bool { return c == next })
		}
		order = append(order, group)
	}
	if len(order) < 2 {
		t.Fatalf("OCM handed %s to every cluster at once (%v); the rollout strategy allows one at a time", cfg, order)
	}
	check(0)
	return order
}

// TestAgentUpgradeAndRollback moves a fleet whose agents follow the principal's image from
// argocd-agent v0.9.0 to v0.10.0 and back, with OCM's own addon-manager rolling the agents one
// cluster at a time. The principal moves first; then the manager writes a config of the new
// release and its Argo CD pair, and OCM hands it to one cluster after another. agentsOnOtherVersion
// counts the clusters OCM has not handed it yet, AgentsAvailable is False for them and the fleet
// is not Ready. The cluster in flight is counted neither way: OCM drops the reference to the
// config it ran when it hands it another, and reports the new one applied only once its work
// is done, so the hub cannot tell which version runs there meanwhile.
func TestAgentUpgradeAndRollback(t *testing.T) {
	useRolloutHub(t)
	const ns = "agent-upgrade"
	clusters := []string{"up-1", "up-2", "up-3"}
	old, _ := version.PairOf("v0.9.0")
	next, _ := version.PairOf("v0.10.0")
	createNamespace(t, ns)
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)
	if err := k8s.Create(context.Background(), principalDeployment(ns, agentRepo+old.Agent)); err != nil {
		t.Fatal(err)
	}
	recordTimeline(t, ns, "fleet", clusters)
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}
	})

	// 1. Installed on v0.9.0, with Argo CD v3.4.3.
	oldCfg := configFor(t, ns, "fleet", old)
	rollOut(t, ns, "fleet", oldCfg, agentRepo+old.Agent, clusters, func(int) {})
	ready(t, ns, "fleet")

	// 2. Upgrade, then 3. roll back: the principal first, then the agents one by one.
	for _, step := range []struct {
		name     string
		from, to version.Pair
	}{{"upgrade", old, next}, {"rollback", next, old}} {
		t.Logf("%s: principal %s -> %s", step.name, step.from.Agent, step.to.Agent)
		setPrincipalImage(t, ns, agentRepo+step.to.Agent)
		cfg := configFor(t, ns, "fleet", step.to)
		order := rollOut(t, ns, "fleet", cfg, agentRepo+step.to.Agent, clusters, func(left int) {
			if left == 0 {
				// Only the clusters in flight are left, and they are not counted.
				waitOtherVersion(t, ns, "fleet", 0)
				return
			}
			eventually(t, fmt.Sprintf("%s: %d agent(s) on another version, and said so", step.name, left), func() error {
				g := getGOC(t, ns, "fleet")
				if g.Status.AgentsOnOtherVersion != int32(left) {
					return fmt.Errorf("agentsOnOtherVersion = %d", g.Status.AgentsOnOtherVersion)
				}
				aa := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAgentsAvailable)
				if aa == nil || aa.Status != metav1.ConditionFalse || !strings.Contains(aa.Message, fmt.Sprintf("%d run another version", left)) ||
					!strings.Contains(aa.Message, step.to.Agent) {
					return fmt.Errorf("AgentsAvailable %+v", aa)
				}
				if meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) {
					return fmt.Errorf("Ready while %d agent(s) are refused", left)
				}
				// The configuration itself is applied: only the agents are behind.
				if !meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured) {
					return fmt.Errorf("AddOnConfigured %+v", meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured))
				}
				return nil
			})
		})
		t.Logf("%s: OCM moved the agents in the order %v", step.name, order)
		ready(t, ns, "fleet")
	}

}

// ready waits for every agent on the principal's version and the fleet Ready.
func ready(t *testing.T, ns, name string) {
	t.Helper()
	waitOtherVersion(t, ns, name, 0)
	conditionIs(t, ns, name, v1alpha1.ConditionAgentsAvailable, metav1.ConditionTrue, v1alpha1.ReasonAgentsAvailable)
	conditionIs(t, ns, name, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
}
