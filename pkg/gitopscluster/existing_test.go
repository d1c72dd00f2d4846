package gitopscluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// probeObject is what OCM's work agent reports for one of a probe's manifests: present or
// not, and the feedback of a present one.
type probeObject struct {
	present            bool
	installedBy, image string
}

// reportProbe writes the status OCM's work agent would write for the probe in cluster's
// namespace: Applied for its generation and, per manifest in order, Available and feedback.
func reportProbe(t *testing.T, cluster string, goc *v1alpha1.GitOpsCluster, objs ...probeObject) {
	t.Helper()
	ctx := context.Background()
	w := &workv1.ManifestWork{}
	eventually(t, cluster+": the probe exists", func() error {
		return k8s.Get(ctx, types.NamespacedName{Namespace: cluster, Name: names.ProbeWorkName(goc)}, w)
	})
	now := metav1.Now()
	w.Status.Conditions = []metav1.Condition{{Type: workv1.WorkApplied, Status: metav1.ConditionTrue, Reason: "AppliedManifestWorkComplete", ObservedGeneration: w.Generation, LastTransitionTime: now}}
	w.Status.ResourceStatus.Manifests = nil
	for i, cfg := range w.Spec.ManifestConfigs {
		o := probeObject{}
		if i < len(objs) {
			o = objs[i]
		}
		status, reason := metav1.ConditionFalse, "ResourceNotAvailable"
		if o.present {
			status, reason = metav1.ConditionTrue, "ResourceAvailable"
		}
		kind := map[string]string{"statefulsets": "StatefulSet", "deployments": "Deployment", "configmaps": "ConfigMap", "customresourcedefinitions": "CustomResourceDefinition"}[cfg.ResourceIdentifier.Resource]
		mc := workv1.ManifestCondition{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: int32(i), Group: cfg.ResourceIdentifier.Group, Resource: cfg.ResourceIdentifier.Resource, Kind: kind,
				Namespace: cfg.ResourceIdentifier.Namespace, Name: cfg.ResourceIdentifier.Name},
			Conditions: []metav1.Condition{{Type: workv1.ManifestAvailable, Status: status, Reason: reason, ObservedGeneration: w.Generation, LastTransitionTime: now}},
		}
		if o.installedBy != "" {
			mc.StatusFeedbacks.Values = append(mc.StatusFeedbacks.Values, workv1.FeedbackValue{Name: spoke.FeedbackInstalledBy, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(o.installedBy)}})
		}
		if o.image != "" {
			mc.StatusFeedbacks.Values = append(mc.StatusFeedbacks.Values, workv1.FeedbackValue{Name: spoke.FeedbackImage, Value: workv1.FieldValue{Type: workv1.String, String: ptr.To(o.image)}})
		}
		w.Status.ResourceStatus.Manifests = append(w.Status.ResourceStatus.Manifests, mc)
	}
	if err := k8s.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
}

func clusterLabels(t *testing.T, cluster string) map[string]string {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: cluster}, mc); err != nil {
		t.Fatal(err)
	}
	return mc.Labels
}

// TestForeignArgoCDGetsNoComponents: the components go to a selected cluster only once its probe
// found no Argo CD the addon did not install there; a cluster running another Argo CD (here
// a newer release in the install namespace) is reported by name, with what was found, and gets
// nothing until existingArgoCD says Replace. A cluster whose probe has not answered waits.
func TestForeignArgoCDGetsNoComponents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "existing-argocd"
	createNamespace(t, ns)
	createManagedClusters(t, "ea-clear", "ea-theirs", "ea-ours", "ea-silent")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "ea-clear", "ea-theirs", "ea-ours", "ea-silent")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	key := names.ComponentsClearedLabel(goc)
	components := config.ComponentsAddonName(config.Default().AddonName)

	// Nothing answered yet: no cluster is cleared.
	eventually(t, "every selected cluster probed and waiting", func() error {
		g := getGOC(t, ns, "fleet")
		if g.Status.ProbingClusters != 4 {
			return fmt.Errorf("probingClusters = %d", g.Status.ProbingClusters)
		}
		return nil
	})
	for _, c := range []string{"ea-clear", "ea-theirs", "ea-ours", "ea-silent"} {
		if _, ok := clusterLabels(t, c)[key]; ok {
			t.Fatalf("%s cleared before its probe answered", c)
		}
	}
	reportProbe(t, "ea-clear", goc)
	reportProbe(t, "ea-theirs", goc, probeObject{present: true, image: "quay.io/argoproj/argocd:v3.6.1"}, probeObject{present: true, image: "quay.io/argoproj/argocd:v3.6.1"},
		probeObject{present: true}, probeObject{present: true})
	reportProbe(t, "ea-ours", goc, probeObject{present: true, installedBy: components, image: "quay.io/argoproj/argocd:v3.4.3"}, probeObject{}, probeObject{},
		probeObject{present: true, installedBy: components})

	conditionIs(t, ns, "fleet", v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, v1alpha1.ReasonForeignArgoCDLeftAlone)
	eventually(t, "the clear and the addon's own clusters cleared, the other one not", func() error {
		for c, want := range map[string]bool{"ea-clear": true, "ea-ours": true, "ea-theirs": false, "ea-silent": false} {
			if _, got := clusterLabels(t, c)[key]; got != want {
				return fmt.Errorf("%s cleared = %v, want %v", c, got, want)
			}
		}
		return nil
	})
	// The labels are written before the pass's status: wait for the status of the same pass.
	var g *v1alpha1.GitOpsCluster
	eventually(t, "the status counts one foreign cluster and one still probing", func() error {
		g = getGOC(t, ns, "fleet")
		if g.Status.ForeignArgoCDClusters != 1 || g.Status.ProbingClusters != 1 {
			return fmt.Errorf("%d foreign, %d probing", g.Status.ForeignArgoCDClusters, g.Status.ProbingClusters)
		}
		return nil
	})
	if len(g.Status.ForeignArgoCD) != 1 || g.Status.ForeignArgoCD[0].Cluster != "ea-theirs" ||
		!strings.Contains(g.Status.ForeignArgoCD[0].Found, "StatefulSet "+config.Default().DefaultAgentNamespace+"/argocd-application-controller (quay.io/argoproj/argocd:v3.6.1)") ||
		!strings.Contains(g.Status.ForeignArgoCD[0].Found, "CustomResourceDefinition applications.argoproj.io") {
		t.Errorf("status: %d foreign, %+v", g.Status.ForeignArgoCDClusters, g.Status.ForeignArgoCD)
	}
	if c := findCond(g, v1alpha1.ConditionForeignArgoCD); !strings.Contains(c.Message, "ea-theirs") || !strings.Contains(c.Message, v1alpha1.LabelArgoCDComponents+"=Existing") {
		t.Errorf("the condition does not say which cluster and what to do: %s", c.Message)
	}
	eventually(t, "a Warning Event names the cluster", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "fleet" && e.Type == corev1.EventTypeWarning && e.Reason == "ForeignArgoCDFound" && strings.Contains(e.Note, "ea-theirs") {
				return nil
			}
		}
		return fmt.Errorf("none among %d", len(list.Items))
	})

	// A cleared cluster whose probe later reports something foreign (one report, an object's
	// label edited on the cluster, say) keeps its label: nothing is uninstalled on it; it is
	// reported, and cleared again once the probe says so.
	reportProbe(t, "ea-clear", goc, probeObject{present: true, image: "quay.io/argoproj/argocd:v3.4.3"})
	eventually(t, "ea-clear reported but still cleared", func() error {
		g := getGOC(t, ns, "fleet")
		if g.Status.ForeignArgoCDClusters != 2 {
			return fmt.Errorf("foreign %d %+v", g.Status.ForeignArgoCDClusters, g.Status.ForeignArgoCD)
		}
		return nil
	})
	if _, ok := clusterLabels(t, "ea-clear")[key]; !ok {
		t.Fatalf("one foreign report took ea-clear's clearance away: its components would be uninstalled")
	}
	reportProbe(t, "ea-clear", goc)

	// The person chooses Existing for that cluster: it is no longer reported as foreign, and
	// its Argo CD, another release than the agent's, is reported as such.
	labelManagedCluster(t, "ea-theirs", string(v1alpha1.ArgoCDComponentsExisting))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionForeignArgoCD, metav1.ConditionFalse, v1alpha1.ReasonNoForeignArgoCD)
	eventually(t, "the Argo CD it keeps reported as another release", func() error {
		g := getGOC(t, ns, "fleet")
		if g.Status.OtherArgoCDVersionClusters != 1 || len(g.Status.OtherArgoCDVersions) != 1 || g.Status.OtherArgoCDVersions[0].Cluster != "ea-theirs" ||
			!strings.Contains(g.Status.OtherArgoCDVersions[0].Found, "Argo CD v3.6.1") {
			return fmt.Errorf("other versions %d %+v", g.Status.OtherArgoCDVersionClusters, g.Status.OtherArgoCDVersions)
		}
		return nil
	})
	labelManagedCluster(t, "ea-theirs", "")
	conditionIs(t, ns, "fleet", v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, v1alpha1.ReasonForeignArgoCDLeftAlone)

	// Or Replace, for the whole GitOpsCluster: an explicit choice to take it over.
	g = getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.ExistingArgoCD = v1alpha1.ExistingArgoCDReplace
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionForeignArgoCD, metav1.ConditionTrue, v1alpha1.ReasonForeignArgoCDReplaced)
	eventually(t, "every cluster cleared with Replace", func() error {
		for _, c := range []string{"ea-clear", "ea-theirs", "ea-ours", "ea-silent"} {
			if _, ok := clusterLabels(t, c)[key]; !ok {
				return fmt.Errorf("%s not cleared", c)
			}
		}
		return nil
	})

	// A cluster leaving the selection loses its label and probe; the GitOpsCluster's deletion
	// removes the rest.
	setDecisions(t, ns, "p", 1, "ea-clear", "ea-theirs", "ea-ours")
	eventually(t, "ea-silent released", func() error {
		if _, ok := clusterLabels(t, "ea-silent")[key]; ok {
			return fmt.Errorf("still labelled")
		}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "ea-silent", Name: names.ProbeWorkName(goc)}, &workv1.ManifestWork{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("probe still there (%v)", err)
		}
		return nil
	})
	if err := k8s.Delete(ctx, getGOC(t, ns, "fleet")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "labels and probes gone with the GitOpsCluster", func() error {
		for _, c := range []string{"ea-clear", "ea-theirs", "ea-ours"} {
			if _, ok := clusterLabels(t, c)[key]; ok {
				return fmt.Errorf("%s still labelled", c)
			}
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: c, Name: names.ProbeWorkName(goc)}, &workv1.ManifestWork{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: probe still there (%v)", c, err)
			}
		}
		return nil
	})
}

// TestUserIDsAssignedReachesBothTemplates: a GitOpsCluster for OpenShift clusters
// (userIDs: Assigned) writes an agent template and a components template whose pods name no
// UID, GID or fsGroup.
func TestUserIDsAssignedReachesBothTemplates(t *testing.T) {
	t.Parallel()
	const ns = "assigned-uids"
	createNamespace(t, ns)
	createManagedClusters(t, "au-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "au-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.UserIDs = v1alpha1.UserIDsAssigned
	})
	goc := getGOC(t, ns, "fleet")
	for _, name := range []string{names.TemplateName(goc), names.ComponentsTemplateName(goc)} {
		eventually(t, "template "+name+" without fixed user IDs", func() error {
			tpl := &addonv1alpha1.AddOnTemplate{}
			if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, tpl); err != nil {
				return err
			}
			for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
				for _, k := range []string{`"runAsUser"`, `"runAsGroup"`, `"fsGroup"`} {
					if strings.Contains(string(m.Raw), k) {
						return fmt.Errorf("a manifest names %s: %.200s", k, m.Raw)
					}
				}
			}
			return nil
		})
	}
}

// TestPodSettingsReachEveryWorkload: a GitOpsCluster's node placement and container resources
// are in every workload of both templates, the application-controller StatefulSet and redis's
// init container included (OCM's decorators reach neither), and the spoke registry reaches
// them too (their images are template variables the manager fills with the mirror).
func TestPodSettingsReachEveryWorkload(t *testing.T) {
	t.Parallel()
	const ns = "pod-settings"
	createNamespace(t, ns)
	createManagedClusters(t, "ps-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "ps-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.NodePlacement = &v1alpha1.NodePlacement{
			NodeSelector: map[string]string{"node-role.kubernetes.io/infra": ""},
			Tolerations:  []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists}},
		}
		g.Spec.ArgoCDAgentAddon.ContainerResources = []v1alpha1.ContainerResources{{Workload: "*",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("48Mi")}}}}
	})
	goc := getGOC(t, ns, "fleet")
	seen := map[string]bool{}
	for _, name := range []string{names.TemplateName(goc), names.ComponentsTemplateName(goc)} {
		eventually(t, "template "+name+" places and sizes every pod", func() error {
			tpl := &addonv1alpha1.AddOnTemplate{}
			if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, tpl); err != nil {
				return err
			}
			for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
				o := &unstructured.Unstructured{}
				if err := o.UnmarshalJSON(m.Raw); err != nil {
					return err
				}
				if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
					continue
				}
				spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
				if sel, _ := spec["nodeSelector"].(map[string]any); sel == nil || sel["node-role.kubernetes.io/infra"] != "" {
					return fmt.Errorf("%s %s: nodeSelector %v", o.GetKind(), o.GetName(), spec["nodeSelector"])
				}
				if tol, _ := spec["tolerations"].([]any); len(tol) == 0 {
					return fmt.Errorf("%s %s: no tolerations", o.GetKind(), o.GetName())
				}
				for _, field := range []string{"initContainers", "containers"} {
					list, _ := spec[field].([]any)
					for _, c := range list {
						// Every image is a template variable the manager fills from the
						// configured registry (TestSpokeRegistryAndPullSecrets checks the values).
						if img, _ := c.(map[string]any)["image"].(string); !strings.HasPrefix(img, "{{") {
							return fmt.Errorf("%s %s %s: image %q is not a template variable", o.GetKind(), o.GetName(), field, img)
						}
						mem, _, _ := unstructured.NestedString(c.(map[string]any), "resources", "requests", "memory")
						if mem != "48Mi" {
							return fmt.Errorf("%s %s %s %v: memory request %q", o.GetKind(), o.GetName(), field, c.(map[string]any)["name"], mem)
						}
						seen[o.GetKind()+"/"+field] = true
					}
				}
			}
			return nil
		})
	}
	for _, want := range []string{"StatefulSet/containers", "Deployment/initContainers", "Deployment/containers"} {
		if !seen[want] {
			t.Errorf("no %s checked: %v", want, seen)
		}
	}
}

// TestArgoCDConfigFromTheHub: the GitOpsCluster's Argo CD configuration lands in the components
// template's ConfigMaps; a key the API server would refuse on the clusters is refused here,
// with a condition, and the template already there is kept.
func TestArgoCDConfigFromTheHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "argocd-config"
	createNamespace(t, ns)
	createManagedClusters(t, "ac-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "ac-1")
	known := "git.example.com ssh-ed25519 AAAA\n"
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.ArgoCDConfig = &v1alpha1.ArgoCDConfig{
			ArgoCDCM:      map[string]string{"timeout.reconciliation": "90s"},
			SSHKnownHosts: &known,
		}
	})
	goc := getGOC(t, ns, "fleet")
	data := func() (map[string]map[string]string, string, error) {
		tpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: names.ComponentsTemplateName(goc)}, tpl); err != nil {
			return nil, "", err
		}
		out := map[string]map[string]string{}
		for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
			o := &unstructured.Unstructured{}
			if err := o.UnmarshalJSON(m.Raw); err != nil {
				return nil, "", err
			}
			if o.GetKind() == "ConfigMap" {
				out[o.GetName()], _, _ = unstructured.NestedStringMap(o.Object, "data")
			}
		}
		return out, tpl.ResourceVersion, nil
	}
	var rv string
	eventually(t, "the configuration in the components template", func() error {
		d, v, err := data()
		if err != nil {
			return err
		}
		rv = v
		if d["argocd-cm"]["timeout.reconciliation"] != "90s" || d["argocd-ssh-known-hosts-cm"]["ssh_known_hosts"] != known {
			return fmt.Errorf("argocd-cm %v, known hosts %q", d["argocd-cm"], d["argocd-ssh-known-hosts-cm"]["ssh_known_hosts"])
		}
		return nil
	})
	g := getGOC(t, ns, "fleet")
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.ArgoCDConfig.ArgoCDCM["not a key"] = "x"
	if err := k8s.Patch(ctx, g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	g = conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonAddOnApplyFailed)
	if c := findCond(g, v1alpha1.ConditionAddOnConfigured); !strings.Contains(c.Message, `"not a key"`) {
		t.Errorf("the condition does not name the key: %s", c.Message)
	}
	if _, v, err := data(); err != nil || v != rv {
		t.Errorf("the template was changed (%v)", err)
	}
}

// TestProbeFollowsTheInstallNamespace: a probe that looks at another namespace than the
// components would go to (agentNamespace changed) is replaced, and its old answer counts for
// nothing: the cluster is not cleared on it.
func TestProbeFollowsTheInstallNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "probe-namespace"
	createNamespace(t, ns)
	createManagedClusters(t, "pn-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "pn-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	reportProbe(t, "pn-1", goc) // nothing in the first namespace
	key := names.ComponentsClearedLabel(goc)
	eventually(t, "cleared on the first namespace", func() error {
		if _, ok := clusterLabels(t, "pn-1")[key]; !ok {
			return fmt.Errorf("not cleared")
		}
		return nil
	})
	base := goc.DeepCopy()
	goc.Spec.ArgoCDAgentAddon.AgentNamespace = "gitops-elsewhere"
	if err := k8s.Patch(ctx, goc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the probe looks at the new namespace", func() error {
		w := &workv1.ManifestWork{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: "pn-1", Name: names.ProbeWorkName(goc)}, w); err != nil {
			return err
		}
		for _, c := range w.Spec.ManifestConfigs {
			if c.ResourceIdentifier.Namespace != "" && c.ResourceIdentifier.Namespace != "gitops-elsewhere" {
				return fmt.Errorf("probe still reads %s", c.ResourceIdentifier.Namespace)
			}
		}
		if len(w.Status.ResourceStatus.Manifests) > 0 {
			return fmt.Errorf("the new probe carries an answer already")
		}
		return nil
	})
}

// TestUnknownSelectionKeepsClearance: while the selection cannot be read in full (the
// Placement's decisions are gone, as when it is re-created), no cluster loses its clearance
// label, which would make OCM uninstall its components; once the decisions are back, a cluster
// they leave out loses it.
func TestUnknownSelectionKeepsClearance(t *testing.T) {
	ctx := context.Background()
	const ns = "clearance-unknown"
	createNamespace(t, ns)
	createManagedClusters(t, "cu-1", "cu-2")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "cu-1", "cu-2")
	// As OCM's scheduler reports it: the count is what tells pages being rewritten (an empty
	// page created, then filled) from a selection that is really empty.
	if err := fakehub.SetPlacementCount(ctx, k8s, ns, "p", 2); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	key := names.ComponentsClearedLabel(goc)
	reportProbe(t, "cu-1", goc)
	reportProbe(t, "cu-2", goc)
	cleared := func(want map[string]bool) func() error {
		return func() error {
			for c, w := range want {
				if _, got := clusterLabels(t, c)[key]; got != w {
					return fmt.Errorf("%s cleared = %v, want %v", c, got, w)
				}
			}
			return nil
		}
	}
	eventually(t, "both clusters cleared", cleared(map[string]bool{"cu-1": true, "cu-2": true}))

	if err := k8s.DeleteAllOf(ctx, &clusterv1beta1.PlacementDecision{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionPlacementResolved, metav1.ConditionTrue, v1alpha1.ReasonPlacementResolved)
	eventually(t, "the pass without decisions has run", func() error {
		if g := getGOC(t, ns, "fleet"); g.Status.SelectedClusters != 0 {
			return fmt.Errorf("selectedClusters = %d", g.Status.SelectedClusters)
		}
		return nil
	})
	consistently(t, "no clearance taken while the selection is unknown", 3*time.Second, cleared(map[string]bool{"cu-1": true, "cu-2": true}))

	// OCM's order: the page first (created empty, then filled), the count after it. Until the
	// count agrees, the pages are being rewritten and cu-1 keeps its clearance.
	setDecisions(t, ns, "p", 1, "cu-1")
	consistently(t, "no clearance taken while the count disagrees with the pages", 2*time.Second, cleared(map[string]bool{"cu-1": true, "cu-2": true}))
	if err := fakehub.SetPlacementCount(ctx, k8s, ns, "p", 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cu-2 released once the selection is known", cleared(map[string]bool{"cu-1": true, "cu-2": false}))
}

// TestProbesComeInBatches: a GitOpsCluster over more clusters than one pass probes gets every
// cluster probed over the passes that follow, and its agents registered before all of them.
func TestProbesComeInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "probe-batches"
	createNamespace(t, ns)
	var clusters []string
	for i := range 4*probesPerPass + 1 {
		clusters = append(clusters, fmt.Sprintf("pb-%02d", i))
	}
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)
	goc := createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	// Five passes, each after the last one's status write and a second's wait: more than the
	// usual 30 s when the package's parallel tests load the API server. What is checked is that
	// every cluster is reached, not the pace.
	poll.Until(t, "every cluster probed", 2*time.Minute, func() error {
		var missing []string
		for _, c := range clusters {
			if err := k8s.Get(ctx, types.NamespacedName{Namespace: c, Name: names.ProbeWorkName(goc)}, &workv1.ManifestWork{}); err != nil {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no probe yet in %v", missing)
		}
		return nil
	})
	if g := getGOC(t, ns, "fleet"); int(g.Status.SelectedClusters) != len(clusters) {
		t.Errorf("selected %d, want %d", g.Status.SelectedClusters, len(clusters))
	}
}

// TestPassesShareProbesInFlight: the record of the probes created and not yet in the cache
// outlives a pass, so the next pass does not create them again.
func TestPassesShareProbesInFlight(t *testing.T) {
	if !gitopscluster.PassesShareProbesInFlight() {
		t.Fatal("each pass writes probes with a record of its own")
	}
}

// TestInstalledComponentsStayCleared: a cluster whose components addon is installed already (by
// an earlier manager, or before its probe was recreated) stays cleared while its probe has not
// answered; one whose addon is being removed, or that has none, waits for its probe.
func TestInstalledComponentsStayCleared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "components-installed"
	createNamespace(t, ns)
	createManagedClusters(t, "ci-installed", "ci-leaving", "ci-new")
	createComponentsMCA(t, "ci-installed")
	leaving := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: "ci-leaving", Name: componentsAddon,
		Finalizers: []string{"test.example.com/hold"}}}
	if err := k8s.Create(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, leaving); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Patch(context.Background(), leaving, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "ci-installed", "ci-leaving", "ci-new")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	goc := getGOC(t, ns, "fleet")
	key := names.ComponentsClearedLabel(goc)

	eventually(t, "the installed cluster cleared, the two others probing", func() error {
		if g := getGOC(t, ns, "fleet"); g.Status.ProbingClusters != 2 {
			return fmt.Errorf("probingClusters = %d", g.Status.ProbingClusters)
		}
		for c, want := range map[string]bool{"ci-installed": true, "ci-leaving": false, "ci-new": false} {
			if _, got := clusterLabels(t, c)[key]; got != want {
				return fmt.Errorf("%s cleared = %v, want %v", c, got, want)
			}
		}
		return nil
	})
}
