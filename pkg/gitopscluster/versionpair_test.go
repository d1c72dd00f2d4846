package gitopscluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

const agentRepo = "quay.io/argoprojlabs/argocd-agent:"

// crdManifests are a template's CustomResourceDefinitions by name, decoded: the part of the
// components that is neither a template variable nor changed by a GitOpsCluster's settings,
// and differs between Argo CD releases.
func crdManifests(t *testing.T, ms []json.RawMessage) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, raw := range ms {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		if o.Kind != "CustomResourceDefinition" {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		out[o.Metadata.Name] = v
	}
	return out
}

func templateRaws(tpl *addonv1alpha1.AddOnTemplate) []json.RawMessage {
	var out []json.RawMessage
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		out = append(out, m.Raw)
	}
	return out
}

// releaseCRDs are the components' CRDs of an Argo CD release as the spoke builder makes them.
func releaseCRDs(t *testing.T, goc *v1alpha1.GitOpsCluster, argoCD string) map[string]any {
	t.Helper()
	tpl, err := spoke.BuildAddOnTemplate(spoke.Input{TemplateName: names.ComponentsTemplateName(goc), AddonName: componentsAddon,
		ArgoCDVersion: argoCD, Mode: string(v1alpha1.AgentModeManaged)})
	if err != nil {
		t.Fatal(err)
	}
	return crdManifests(t, templateRaws(tpl))
}

// componentsAre waits for the GitOpsCluster's config to name Argo CD release argoCD's image and
// its components template, and those of the clusters with an Argo CD configuration of their
// own, to carry that release's manifests.
func componentsAre(t *testing.T, ns, name, argoCD string) {
	t.Helper()
	var other string
	for _, p := range version.Pairs() {
		if p.ArgoCD != argoCD {
			other = p.ArgoCD
		}
	}
	goc := getGOC(t, ns, name)
	want, notWant := releaseCRDs(t, goc, argoCD), releaseCRDs(t, goc, other)
	if reflect.DeepEqual(want, notWant) {
		t.Fatalf("Argo CD %s and %s have the same CRDs: they cannot tell the releases apart here", argoCD, other)
	}
	eventually(t, fmt.Sprintf("%s/%s installs Argo CD %s", ns, name, argoCD), func() error {
		goc := getGOC(t, ns, name)
		if goc.Status.AddOnDeploymentConfig == "" {
			return fmt.Errorf("no config yet")
		}
		adc := &addonv1alpha1.AddOnDeploymentConfig{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: goc.Status.AddOnDeploymentConfig}, adc); err != nil {
			return err
		}
		if got := addon.Variable(adc, addon.VarArgoCDImage); got != "quay.io/argoproj/argocd:"+argoCD {
			return fmt.Errorf("config %s runs Argo CD image %s (agent %s)", adc.Name, got, addon.Variable(adc, addon.VarAgentImage))
		}
		tmpls := []string{names.ComponentsTemplateName(goc)}
		for _, e := range goc.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig {
			tmpls = append(tmpls, names.ComponentsClusterTemplateName(goc, e.ClusterName))
		}
		for _, n := range tmpls {
			tpl := &addonv1alpha1.AddOnTemplate{}
			if err := k8s.Get(context.Background(), types.NamespacedName{Name: n}, tpl); err != nil {
				return err
			}
			if got := crdManifests(t, templateRaws(tpl)); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("template %s does not carry Argo CD %s's CRDs (Argo CD %s's: %v)", n, argoCD, other, reflect.DeepEqual(got, notWant))
			}
		}
		return nil
	})
}

func setAgentImage(t *testing.T, ns, name, image string) {
	t.Helper()
	g := getGOC(t, ns, name)
	base := g.DeepCopy()
	g.Spec.ArgoCDAgentAddon.Image = image
	if err := k8s.Patch(context.Background(), g, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// unsupportedEvents counts the Warning Events saying that name's agent image is no supported
// release.
func unsupportedEvents(t *testing.T, ns, name string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == addonobjects.ReasonUnsupportedAgentRelease {
			if e.Series != nil {
				n += int(e.Series.Count)
			} else {
				n++
			}
		}
	}
	return n
}

// A GitOpsCluster's Argo CD components are the pair of its agent image's release: v0.9.0's agent
// gets Argo CD v3.4.3 beside it (also in a cluster's own template), the default agent v3.5.0,
// and a change of the image moves the components along.
func TestComponentsFollowTheAgentImagesPair(t *testing.T) {
	t.Parallel()
	const ns = "version-pair"
	createNamespace(t, ns)
	createManagedClusters(t, "vp-old", "vp-default")
	createPlacement(t, ns, "pl-old")
	setDecisions(t, ns, "pl-old", 1, "vp-old")
	createPlacement(t, ns, "pl-default")
	setDecisions(t, ns, "pl-default", 1, "vp-default")
	old, _ := version.PairOf("v0.9.0")
	createGitOpsCluster(t, ns, "old", "pl-old", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Image = agentRepo + old.Agent
		g.Spec.ArgoCDAgentAddon.ClusterArgoCDConfig = []v1alpha1.ClusterArgoCDConfig{
			{ClusterName: "vp-old", ArgoCDConfig: v1alpha1.ArgoCDConfig{ArgoCDCM: map[string]string{"a": "b"}}}}
	})
	createGitOpsCluster(t, ns, "default", "pl-default", withAddress("principal.example.com"))
	componentsAre(t, ns, "old", old.ArgoCD)
	componentsAre(t, ns, "default", version.Default().ArgoCD)
	for _, n := range []string{"old", "default"} {
		g := conditionIs(t, ns, n, v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
		if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured); strings.Contains(c.Message, "no supported") {
			t.Errorf("%s: a supported release is reported as unsupported: %s", n, c.Message)
		}
	}

	setAgentImage(t, ns, "old", agentRepo+version.Default().Agent)
	componentsAre(t, ns, "old", version.Default().ArgoCD)
	setAgentImage(t, ns, "old", agentRepo+old.Agent)
	componentsAre(t, ns, "old", old.ArgoCD)
}

// An agent image of no supported release (one built at home) gets the default pair's
// components, and the GitOpsCluster says so: in AddOnConfigured, and in one Event per change.
func TestUnsupportedAgentReleaseIsReported(t *testing.T) {
	t.Parallel()
	const ns = "version-pair-unknown"
	createNamespace(t, ns)
	createManagedClusters(t, "vpu-c1")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, "vpu-c1")
	def := version.Default()
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Image = agentRepo + def.Agent
	})
	componentsAre(t, ns, "fleet", def.ArgoCD)
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured); strings.Contains(c.Message, "no supported") {
		t.Errorf("a supported release is reported as unsupported: %s", c.Message)
	}

	setAgentImage(t, ns, "fleet", agentRepo+"my-build")
	componentsAre(t, ns, "fleet", def.ArgoCD)
	eventually(t, "AddOnConfigured names the unsupported tag", func() error {
		g := getGOC(t, ns, "fleet")
		c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != g.Generation {
			return fmt.Errorf("condition %+v", c)
		}
		var supported []string
		for _, p := range version.Pairs() {
			supported = append(supported, p.Agent)
		}
		for _, want := range []string{`"my-build" is no supported argocd-agent release`, "(supported: " + strings.Join(supported, ", ") + ")", "default pair's (Argo CD " + def.ArgoCD + ")"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("message lacks %q: %s", want, c.Message)
			}
		}
		return nil
	})
	eventually(t, "a Warning Event", func() error {
		if n := unsupportedEvents(t, ns, "fleet"); n != 1 {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
	// Further passes with the same image say nothing new.
	for i := 0; i < 3; i++ {
		wake(t, ns, "fleet")
		time.Sleep(time.Second)
	}
	if n := unsupportedEvents(t, ns, "fleet"); n != 1 {
		t.Errorf("%d Events for one change of the image", n)
	}
	// Back on a supported release, the note goes.
	setAgentImage(t, ns, "fleet", agentRepo+def.Agent)
	eventually(t, "the note gone", func() error {
		g := getGOC(t, ns, "fleet")
		if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured); c == nil || strings.Contains(c.Message, "no supported") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	// Another change to such an image is told again.
	setAgentImage(t, ns, "fleet", agentRepo+"my-other-build")
	eventually(t, "a second Warning Event", func() error {
		if n := unsupportedEvents(t, ns, "fleet"); n != 2 {
			return fmt.Errorf("%d Events", n)
		}
		return nil
	})
}

// A cluster keeping its own Argo CD is compared with the Argo CD its GitOpsCluster's agent is
// built against: v3.4.3 is no skew beside v0.9.0's agent, v3.5.0 is.
func TestSkewIsAgainstTheAgentImagesPair(t *testing.T) {
	t.Parallel()
	const ns = "version-pair-skew"
	createNamespace(t, ns)
	createManagedClusters(t, "vps-c1")
	createPlacement(t, ns, "pl")
	setDecisions(t, ns, "pl", 1, "vps-c1")
	old, _ := version.PairOf("v0.9.0")
	createGitOpsCluster(t, ns, "fleet", "pl", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Image = agentRepo + old.Agent
		g.Spec.ArgoCDAgentAddon.ArgoCDComponents = v1alpha1.ArgoCDComponentsExisting
	})
	goc := getGOC(t, ns, "fleet")
	otherVersions := func() (int32, []v1alpha1.FoundArgoCD) {
		g := getGOC(t, ns, "fleet")
		return g.Status.OtherArgoCDVersionClusters, g.Status.OtherArgoCDVersions
	}
	reportProbe(t, "vps-c1", goc, probeObject{present: true, image: "quay.io/argoproj/argocd:" + version.Default().ArgoCD})
	eventually(t, "the default pair's Argo CD reported as another release", func() error {
		if n, found := otherVersions(); n != 1 || len(found) != 1 || !strings.Contains(found[0].Found, "built against Argo CD "+old.ArgoCD) {
			return fmt.Errorf("%d %+v", n, found)
		}
		return nil
	})
	reportProbe(t, "vps-c1", goc, probeObject{present: true, image: "quay.io/argoproj/argocd:" + old.ArgoCD})
	eventually(t, "the agent's own Argo CD not reported", func() error {
		if n, found := otherVersions(); n != 0 {
			return fmt.Errorf("%d %+v", n, found)
		}
		return nil
	})
}
