// Command demo runs argocd-agent-addon against a local hub API server built from source:
// it installs the CRDs, starts the manager binary, applies the upstream README's GitOpsCluster
// with a Placement, and prints what a person wants to see. It runs until interrupted (or, with
// --exit, stops after printing).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const readmeExample = `
apiVersion: apps.open-cluster-management.io/v1alpha1
kind: GitOpsCluster
metadata:
  name: my-gitops-cluster
  namespace: open-cluster-management
spec:
  placementRef:
    kind: Placement
    name: argocd-placement
  argoCDAgentAddon:
    mode: managed
`

const ns = "open-cluster-management"

var clusters = []string{"cluster1", "cluster2"}

func main() {
	exit := flag.Bool("exit", false, "stop after printing the summary")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	dir := flag.String("dir", "bin/demo", "folder for the kubeconfig and logs")
	flag.Parse()
	if err := run(*binary, *dir, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run(binary, dir string, exit bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dir, _ = filepath.Abs(dir)

	step("starting a local hub API server (kube-apiserver + etcd v1.36, built from source) with the GitOpsCluster and OCM CRDs")
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	kubeconfig, err := env.KubeconfigFile(dir)
	if err != nil {
		return err
	}
	c := env.Client

	step("starting the manager: %s manager --kubeconfig %s", binary, kubeconfig)
	logPath := filepath.Join(dir, "manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	mgr := exec.Command(binary, "manager", "--kubeconfig", kubeconfig, "--metrics-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0")
	mgr.Stdout, mgr.Stderr = logFile, logFile
	if err := mgr.Start(); err != nil {
		return fmt.Errorf("starting %s (run make build): %w", binary, err)
	}
	defer func() { _ = mgr.Process.Signal(syscall.SIGTERM); _, _ = mgr.Process.Wait() }()

	step("creating the hub side a user has: namespace %s, managed clusters %s, Placement argocd-placement, principal Service", ns, strings.Join(clusters, ", "))
	if err := seed(ctx, c); err != nil {
		return err
	}

	step("applying the upstream README's GitOpsCluster unchanged:%s", indent(readmeExample))
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(readmeExample), &u.Object); err != nil {
		return err
	}
	if err := c.Create(ctx, u); err != nil {
		return err
	}

	step("waiting for the fleet to be configured...")
	g, err := waitConfigured(ctx, c)
	if err != nil {
		return err
	}
	printSummary(ctx, c, g, kubeconfig, logPath)
	if exit {
		return nil
	}
	fmt.Println("\nThe hub keeps running; press Ctrl-C to stop everything.")
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}

func seed(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	for _, name := range clusters {
		if err := c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil {
			return err
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-placement"}}); err != nil {
		return err
	}
	// No OCM placement controller runs in this embedded hub: the demo writes the decision
	// that controller would write for a Placement selecting both clusters.
	pd := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-placement-decision-1",
		Labels: map[string]string{clusterv1beta1.PlacementLabel: "argocd-placement", clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
	if err := c.Create(ctx, pd); err != nil {
		return err
	}
	for _, name := range clusters {
		pd.Status.Decisions = append(pd.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: name, Reason: "demo"})
	}
	if err := c.Status().Update(ctx, pd); err != nil {
		return err
	}
	// The principal's Service, as the argocd-agent principal install creates it; its
	// load-balancer address is what a cloud load balancer would report.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "principal.hub.example"}}
	return c.Status().Update(ctx, svc)
}

func waitConfigured(ctx context.Context, c client.Client) (*v1alpha1.GitOpsCluster, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "my-gitops-cluster"}, g); err != nil {
			return nil, err
		}
		if meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionAddOnConfigured) && g.Status.ObservedGeneration == g.Generation {
			return g, nil
		}
		if time.Now().After(deadline) {
			return g, fmt.Errorf("the GitOpsCluster was not configured within 2 minutes; conditions: %+v", g.Status.Conditions)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printSummary(ctx context.Context, c client.Client, g *v1alpha1.GitOpsCluster, kubeconfig, logPath string) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tMODE\tPLACEMENT\tSELECTED\tAVAILABLE\tREADY")
	ready := "Unknown"
	if cnd := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); cnd != nil {
		ready = string(cnd.Status)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", g.Name, g.Spec.ArgoCDAgentAddon.Mode, g.Spec.PlacementRef.Name, g.Status.SelectedClusters, g.Status.AvailableAgents, ready)
	_ = w.Flush()

	fmt.Println("\nConditions:")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, cnd := range g.Status.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", cnd.Type, cnd.Status, cnd.Reason, cnd.Message)
	}
	_ = w.Flush()
	if p := g.Status.Principal; p != nil {
		fmt.Printf("\nPrincipal endpoint handed to the agents: %s:%d (from %s)\n", p.Address, p.Port, p.Source)
	}

	fmt.Println("\nHub PKI and agent registrations in namespace " + ns + ":")
	var secrets corev1.SecretList
	_ = c.List(ctx, &secrets, client.InNamespace(ns))
	sort.Slice(secrets.Items, func(i, j int) bool { return secrets.Items[i].Name < secrets.Items[j].Name })
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, s := range secrets.Items {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", s.Name, s.Type, describeCert(s))
	}
	_ = w.Flush()

	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := c.Get(ctx, types.NamespacedName{Name: "argocd-agent-addon"}, cma); err == nil {
		fmt.Println("\nClusterManagementAddOn argocd-agent-addon, install strategy " + cma.Spec.InstallStrategy.Type + ":")
		for _, p := range cma.Spec.InstallStrategy.Placements {
			var cfgs []string
			for _, cfg := range p.Configs {
				cfgs = append(cfgs, cfg.Resource+"/"+strings.TrimPrefix(cfg.Namespace+"/"+cfg.Name, "/"))
			}
			fmt.Printf("  placement %s/%s  rollout %s  configs %s\n", p.Namespace, p.Name, p.RolloutStrategy.Type, strings.Join(cfgs, ", "))
		}
	}
	fmt.Println("\nOCM's addon-manager would now install the agent on every selected cluster; this embedded")
	fmt.Println("hub runs no OCM controllers, so AgentsAvailable waits for ManagedClusterAddOns.")
	fmt.Printf("\nkubectl against the hub:  kubectl --kubeconfig %s get goc -A\n", kubeconfig)
	fmt.Printf("manager log:              %s\n", logPath)
}

func describeCert(s corev1.Secret) string {
	data := s.Data["tls.crt"]
	if len(data) == 0 {
		if _, ok := s.Data["jwt.key"]; ok {
			return "JWT signing key (RSA, PKCS#8)"
		}
		if s.Labels["argocd.argoproj.io/secret-type"] == "cluster" {
			return "Argo CD cluster secret for agent " + string(s.Data["name"])
		}
		return ""
	}
	certs, err := pki.ParseCertificates(data)
	if err != nil || len(certs) == 0 {
		return "unparsable certificate"
	}
	cert := certs[0]
	sans := strings.Join(cert.DNSNames, ",")
	if len(sans) > 60 {
		sans = sans[:57] + "..."
	}
	return fmt.Sprintf("CN=%s expires %s %s", cert.Subject.CommonName, cert.NotAfter.Format("2006-01-02"), sans)
}

func indent(s string) string {
	return strings.ReplaceAll("\n"+strings.TrimSpace(s), "\n", "\n      ")
}
