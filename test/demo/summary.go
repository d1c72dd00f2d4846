package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
)

func (d *demo) printSummary(ctx context.Context) {
	step("the result")
	d.printClusters(ctx)
	d.printGitOpsCluster(ctx)
	d.printAddons(ctx)
	for _, c := range append([]string{"hub"}, d.f.Clusters()...) {
		fmt.Printf("\nPods on %s (kubectl --kubeconfig %s get pods -A -o wide):\n", c, d.kubeconfig(c))
		if err := nodeapps.WritePodTable(ctx, d.client(c), os.Stdout, "  "); err != nil {
			fmt.Println("  ", err)
		}
	}
	d.printApplications(ctx)
	d.printPullModel(ctx)
	d.printAgentImage(ctx)

	fmt.Println("\nLook around (kubectl is not needed by the demo itself):")
	fmt.Printf("  hub:       kubectl --kubeconfig %s -n %s get goc,placements,svc,deploy\n", d.f.HubKubeconfigPath(), ns)
	fmt.Printf("             kubectl --kubeconfig %s get managedclusters,managedclusteraddons -A\n", d.f.HubKubeconfigPath())
	for _, c := range d.f.Clusters() {
		fmt.Printf("  %-10s kubectl --kubeconfig %s -n %s get pods,applications -o wide\n", c+":", d.f.SpokeKubeconfigPath(c), agentNS)
	}
	fmt.Printf("  logs:      %s (containerd's, the kubelet's and kube-proxy's in <cluster>-node)\n", d.f.LogDir())
}

func (d *demo) kubeconfig(cluster string) string {
	if cluster == "hub" {
		return d.f.HubKubeconfigPath()
	}
	return d.f.SpokeKubeconfigPath(cluster)
}

// printClusters prints the ManagedClusters as the hub has them, with each cluster's node.
func (d *demo) printClusters(ctx context.Context) {
	fmt.Println("\nClusters (ManagedClusters on the hub; the node as the cluster's API server has it):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tJOINED\tAVAILABLE\tNODE\tNODE READY\tINTERNAL IP\tCONTAINERD")
	for _, c := range append([]string{"hub"}, d.f.Clusters()...) {
		joined, avail := "(hub)", "(hub)"
		if c != "hub" {
			mc := &clusterv1.ManagedCluster{}
			joined, avail = "-", "-"
			if err := d.hub.Get(ctx, client.ObjectKey{Name: c}, mc); err == nil {
				joined = condStatus(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined)
				avail = condStatus(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
			}
		}
		n := d.f.NodeOf(c)
		name, ready, ip, sock := "-", "-", "-", "-"
		if n != nil {
			name, ip, sock = n.Name(), n.NodeIP(), n.ContainerdSocket()
			obj := &corev1.Node{}
			if err := d.client(c).Get(ctx, client.ObjectKey{Name: n.Name()}, obj); err == nil {
				for _, cond := range obj.Status.Conditions {
					if cond.Type == corev1.NodeReady {
						ready = string(cond.Status)
					}
				}
			}
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", c, joined, avail, name, ready, ip, sock)
	}
	_ = w.Flush()
}

func (d *demo) printGitOpsCluster(ctx context.Context) {
	g := &v1alpha1.GitOpsCluster{}
	if err := d.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: gocName}, g); err != nil {
		fmt.Println("\nGitOpsCluster:", err)
		return
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "GITOPSCLUSTER\tMODE\tCOMPONENTS\tPLACEMENT\tSELECTED\tAVAILABLE AGENTS\tREADY")
	fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%d\t%d\t%s\n", g.Namespace, g.Name, g.Spec.ArgoCDAgentAddon.Mode, g.Spec.ArgoCDAgentAddon.ArgoCDComponents,
		g.Spec.PlacementRef.Name, g.Status.SelectedClusters, g.Status.AvailableAgents, condStatus(g.Status.Conditions, v1alpha1.ConditionReady))
	_ = w.Flush()
	if p := g.Status.Principal; p != nil {
		fmt.Printf("Principal endpoint handed to the agents: %s:%d (source %s: the hub node's address and the Service's node port)\n", p.Address, p.Port, p.Source)
	}
	fmt.Println("Conditions (the agents are unavailable until argocd-agent's image is provided, see below):")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, c := range g.Status.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, oneLine(c.Message, 110))
	}
	_ = w.Flush()
}

// printAddons prints every ManagedClusterAddOn with its conditions, and the agent's
// certificate.
func (d *demo) printAddons(ctx context.Context) {
	fmt.Println("\nAddons (ManagedClusterAddOns on the hub):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tADDON\tAVAILABLE\tDEGRADED\tPROGRESSING\tMESSAGE")
	for _, c := range d.f.Clusters() {
		list := &addonv1alpha1.ManagedClusterAddOnList{}
		if err := d.hub.List(ctx, list, client.InNamespace(c)); err != nil {
			fmt.Fprintf(w, "  %s\t%v\n", c, err)
			continue
		}
		for _, a := range list.Items {
			msg := ""
			if cond := meta.FindStatusCondition(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable); cond != nil {
				msg = oneLine(cond.Message, 90)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", c, a.Name,
				condStatus(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable),
				condStatus(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionDegraded),
				condStatus(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionProgressing), msg)
		}
	}
	_ = w.Flush()
	fmt.Println("\nAgent client certificates (issued by this project's signer, on each cluster):")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tSUBJECT\tISSUER\tEXPIRES")
	for _, c := range d.f.Clusters() {
		s, err := clientCert(ctx, d.spokes[c])
		if err != nil {
			fmt.Fprintf(w, "  %s\t-\t%v\n", c, err)
			continue
		}
		subject, issuer, expires := "-", "-", "-"
		if certs, err := pki.ParseCertificates(s.Data[corev1.TLSCertKey]); err == nil && len(certs) > 0 {
			subject, issuer, expires = "CN="+certs[0].Subject.CommonName, certs[0].Issuer.CommonName, certs[0].NotAfter.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c, subject, issuer, expires)
	}
	_ = w.Flush()
}

// printAgentImage says why the agent pods wait and how to give the nodes argocd-agent's image.
func (d *demo) printAgentImage(ctx context.Context) {
	image := ""
	for _, c := range d.f.Clusters() {
		dep := &appsv1.Deployment{}
		if err := d.spokes[c].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, dep); err != nil {
			continue
		}
		for _, ctr := range dep.Spec.Template.Spec.Containers {
			if ctr.Name == addon.AgentContainerName {
				image = ctr.Image
			}
		}
	}
	if image == "" {
		return
	}
	reg := d.f.RegistryHost()
	// The GitOpsCluster names no image and no principal runs: the agents get the manager's
	// default, moved to the fleet's registry by spoke.imageRegistry.
	upstream := version.DefaultAgentImage
	fmt.Printf("\nargocd-agent is not running: its image cannot be built here (its Go module is not served), so\n")
	fmt.Printf("each agent pod waits for %s (ImagePullBackOff):\n", image)
	fmt.Printf("the manager's default agent image, %s, behind spoke.imageRegistry=%s.\nTo run the agents, save the real image\n", upstream, reg)
	fmt.Printf("(for example `crane pull %s argocd-agent.tar` on a machine with internet access) and either\n", upstream)
	fmt.Printf("  push it to the fleet's registry (plain HTTP):\n")
	fmt.Printf("    crane push --insecure argocd-agent.tar %s\n", image)
	fmt.Printf("  or import it into each managed cluster node's containerd (the pull policy is IfNotPresent):\n")
	for _, c := range d.f.Clusters() {
		if n := d.f.NodeOf(c); n != nil {
			sock := n.ContainerdSocket()
			fmt.Printf("    ctr --address %s -n k8s.io images import argocd-agent.tar && \\\n", sock)
			fmt.Printf("      ctr --address %s -n k8s.io images tag %s %s\n", sock, upstream, image)
		}
	}
	fmt.Printf("  then restart the agents: kubectl --kubeconfig <cluster kubeconfig> -n %s delete pod -l app.kubernetes.io/name=%s\n", agentNS, addon.AgentName)
}

func condStatus(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return "-"
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		return s[:max-3] + "..."
	}
	return s
}
