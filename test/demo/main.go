// Command demo runs argocd-agent-addon on a real local Open Cluster Management fleet
// (test/fleet): a hub and two managed clusters, each its own etcd, kube-apiserver and
// kube-controller-manager, with OCM v1.2.1's hub controllers and klusterlet agents, all plain
// local processes. It runs the manager binary against the hub, applies the upstream README's
// GitOpsCluster with a Placement selecting both clusters, waits until the agents are installed
// and have their certificates. Then it runs Argo CD v3.6 (repo-server and application-controller,
// the real binaries) on each managed cluster, serves a Git repository with a guestbook-like
// application on loopback, creates an Application on each cluster's own Argo CD and waits until
// Argo CD has synced it and reports it Healthy. It prints what a person wants to see and runs
// until interrupted (or, with --exit, stops after printing).
//
// Simulated, and said so in the output: the kubelet (no pod runs; the agent and guestbook
// Deployments' status is written as if their pods were up) and the cloud load balancer (the
// principal Service's status gets the address a load balancer would report). No argocd-agent
// principal runs, so the Applications are created on each cluster's Argo CD directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// readmeExample is the upstream README's GitOpsCluster, applied unchanged.
const readmeExample = testenv.ReadmeGitOpsCluster

const (
	ns        = "open-cluster-management"
	gocName   = "my-gitops-cluster"
	addonName = addon.DefaultAddonName
	agentNS   = addon.DefaultAgentInstallNamespace
	waitLimit = 3 * time.Minute

	guestbookApp  = "guestbook"
	guestbookNS   = "guestbook"
	guestbookName = "guestbook-ui" // Deployment and Service
	guestbookImg  = "gcr.io/heptio-images/ks-guestbook-demo:0.2"
)

func main() {
	exit := flag.Bool("exit", false, "stop after printing the summary")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary (make build)")
	dir := flag.String("dir", "", "run directory for logs, kubeconfigs and data; default bin/fleet/<time>-<pid>")
	flag.Parse()
	if err := run(*binary, *dir, *exit); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

var begin = time.Now()

func step(format string, args ...any) {
	fmt.Printf("==> [%5.1fs] "+format+"\n", append([]any{time.Since(begin).Seconds()}, args...)...)
}

func progress(format string, args ...any) {
	fmt.Printf("    [%5.1fs] "+format+"\n", append([]any{time.Since(begin).Seconds()}, args...)...)
}

func run(binary, dir string, exit bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	binary, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("manager binary: %w (run make build)", err)
	}

	step("building or locating the binaries (kube-apiserver, etcd, kube-controller-manager v1.36; OCM v1.2.1); minutes the first time")
	_, _, k8sTime, ocmTime, err := fleet.Binaries()
	if err != nil {
		return err
	}
	progress("kubernetes binaries ready in %s, OCM binaries in %s", k8sTime.Round(time.Millisecond), ocmTime.Round(time.Millisecond))
	step("building or locating Argo CD v3.6.1 (one argocd binary for every component); minutes the first time")
	_, argoTime, err := fleet.ArgoCDBinaries()
	if err != nil {
		return err
	}
	progress("Argo CD ready in %s", argoTime.Round(time.Millisecond))

	step("starting a local OCM fleet: a hub and managed clusters cluster1 and cluster2, every component a local process")
	f, err := fleet.Start(ctx, fleet.Options{
		Clusters:         []string{"cluster1", "cluster2"},
		BindingNamespace: ns,
		HubCRDPaths:      []string{filepath.Join(testenv.RepoRoot(), "manifests", "crds")},
		Dir:              dir,
		Logf:             progress,
	})
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the fleet")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping the fleet:", err)
		}
	}()
	d := &demo{f: f}
	if err := d.connect(); err != nil {
		return err
	}

	step("installing the chart's RBAC on the hub as `helm install` would (ServiceAccount, ClusterRoles, Roles, bindings; no Deployment)")
	if err := fleet.EnsureNamespaces(ctx, d.hub, ns, fleet.ArgoCDNamespace); err != nil {
		return err
	}
	install, err := testenv.InstallChart(ctx, d.hub, ns, map[string]any{"managedNamespaces": []any{ns}})
	if err != nil {
		return err
	}
	user, groups := fleet.ServiceAccountUser(ns, install.ServiceAccount), fleet.ServiceAccountGroups(ns)
	managerKubeconfig, _, err := f.HubUserKubeconfig("argocd-agent-addon-manager", user, groups...)
	if err != nil {
		return err
	}
	progress("the manager runs as %s, with the chart's RBAC and nothing more", user)

	step("starting the manager against the hub: %s manager --kubeconfig %s", binary, managerKubeconfig)
	mgr, err := f.StartProcess(fleet.ProcessSpec{
		Name: "argocd-agent-addon-manager",
		Path: binary,
		Args: install.Args("--kubeconfig="+managerKubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--leader-elect=false"),
	})
	if err != nil {
		return err
	}
	d.managerLog = mgr.LogPath

	step("creating what a user has on the hub: Placement argocd-placement (all clusters of the bound set %q) and the principal Service", f.ClusterSet())
	if err := d.seed(ctx); err != nil {
		return err
	}

	step("applying the upstream README's GitOpsCluster unchanged:%s", indent(readmeExample))
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(readmeExample), &u.Object); err != nil {
		return err
	}
	if err := d.hub.Create(ctx, u); err != nil {
		return err
	}

	step("waiting for OCM to install the agent on every selected cluster and for their certificates")
	if err := d.waitAgents(ctx); err != nil {
		return err
	}
	g, err := d.waitReady(ctx)
	if err != nil {
		return err
	}
	step("deploying a guestbook application with Argo CD on every managed cluster")
	if err := d.deployGuestbook(ctx); err != nil {
		return err
	}
	step("the basic pull model: the same guestbook from hub Applications, delivered as ManifestWorks")
	if err := d.deployPullModel(ctx); err != nil {
		return err
	}
	d.printSummary(ctx, g)
	if exit {
		fmt.Println("\n--exit: the fleet stops now (logs and kubeconfigs stay); run without it to keep the fleet up.")
		return nil
	}
	fmt.Println("\nThe fleet keeps running; press Ctrl-C to stop everything.")
	go d.simulateKubelet(ctx)
	<-ctx.Done()
	return nil
}

type demo struct {
	f          *fleet.Fleet
	hub        client.Client
	spokes     map[string]client.Client
	managerLog string
	repo       *fleet.GitRepo
	argo       map[string]*fleet.ArgoCD
}

func (d *demo) connect() error {
	scheme := fleet.Scheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	var err error
	if d.hub, err = client.New(d.f.HubConfig(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	d.spokes = map[string]client.Client{}
	for _, c := range d.f.Clusters() {
		if d.spokes[c], err = client.New(d.f.SpokeConfig(c), client.Options{Scheme: scheme}); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) seed(ctx context.Context) error {
	// No predicates: every cluster of the cluster sets bound to the namespace, i.e. both.
	p := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-placement"}}
	if err := d.hub.Create(ctx, p); err != nil {
		return err
	}
	// The principal's Service, as the argocd-agent principal install creates it. No cloud
	// runs here: the demo writes the status a load balancer would report.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}
	if err := d.hub.Create(ctx, svc); err != nil {
		return err
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "principal.hub.example"}}
	if err := d.hub.Status().Update(ctx, svc); err != nil {
		return err
	}
	progress("Service %s/argocd-agent-principal: load-balancer hostname principal.hub.example (simulated: written by the demo)", ns)
	return nil
}

// waitAgents waits, per cluster, for the agent Deployment on the cluster's own API server,
// marks it available (the simulated kubelet), and waits for the client certificate.
func (d *demo) waitAgents(ctx context.Context) error {
	for _, c := range d.f.Clusters() {
		spoke := d.spokes[c]
		dep := &appsv1.Deployment{}
		if err := d.poll(ctx, c+": agent Deployment "+agentNS+"/"+addon.AgentName, func(ctx context.Context) error {
			return spoke.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, dep)
		}); err != nil {
			return err
		}
		progress("%s: Deployment %s/%s applied by OCM's work agent", c, agentNS, addon.AgentName)
		if err := d.f.MarkDeploymentAvailable(ctx, c, agentNS, addon.AgentName); err != nil {
			return err
		}
		progress("%s: agent marked available (SIMULATED kubelet: no pod runs here, the demo writes the Deployment's status)", c)
		if err := d.poll(ctx, c+": client certificate", func(ctx context.Context) error {
			_, err := clientCert(ctx, spoke)
			return err
		}); err != nil {
			return err
		}
		progress("%s: client certificate issued by this project's signer and stored by OCM's registration agent", c)
	}
	return nil
}

func (d *demo) waitReady(ctx context.Context) (*v1alpha1.GitOpsCluster, error) {
	g := &v1alpha1.GitOpsCluster{}
	err := d.poll(ctx, "GitOpsCluster "+gocName+" Ready", func(ctx context.Context) error {
		if err := d.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: gocName}, g); err != nil {
			return err
		}
		if g.Status.ObservedGeneration != g.Generation || !meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("conditions: %s", conditions(g.Status.Conditions))
		}
		return nil
	})
	if err == nil {
		progress("GitOpsCluster %s/%s is Ready", ns, gocName)
	}
	return g, err
}

// poll retries check every 250ms for waitLimit, stopping early when a fleet process dies.
func (d *demo) poll(ctx context.Context, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(waitLimit)
	for {
		if err := d.f.Err(); err != nil {
			return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, d.f.LogDir())
		}
		err := check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not there after %s: %v (logs in %s)", what, waitLimit, err, d.f.LogDir())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func clientCert(ctx context.Context, spoke client.Client) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	name := addon.ClientCertSecretName(addonName, addon.DefaultSignerName)
	if err := spoke.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: name}, s); err != nil {
		return nil, err
	}
	if len(s.Data[corev1.TLSCertKey]) == 0 {
		return nil, errors.New("no tls.crt yet")
	}
	return s, nil
}

func (d *demo) printSummary(ctx context.Context, g *v1alpha1.GitOpsCluster) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "GITOPSCLUSTER\tMODE\tPLACEMENT\tSELECTED\tAVAILABLE\tREADY")
	ready := "Unknown"
	if c := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		ready = string(c.Status)
	}
	fmt.Fprintf(w, "%s/%s\t%s\t%s\t%d\t%d\t%s\n", g.Namespace, g.Name, g.Spec.ArgoCDAgentAddon.Mode, g.Spec.PlacementRef.Name,
		g.Status.SelectedClusters, g.Status.AvailableAgents, ready)
	_ = w.Flush()

	fmt.Println("\nClusters (read from each managed cluster's own API server, addon state from the hub):")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tADDON AVAILABLE\tAGENT DEPLOYMENT\tIMAGE\tCERTIFICATE SUBJECT\tEXPIRES")
	for _, c := range d.f.Clusters() {
		avail := "-"
		mca := &addonv1alpha1.ManagedClusterAddOn{}
		if err := d.hub.Get(ctx, client.ObjectKey{Namespace: c, Name: addonName}, mca); err == nil {
			if cond := meta.FindStatusCondition(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable); cond != nil {
				avail = string(cond.Status)
			}
		}
		depState, image := "missing", "-"
		dep := &appsv1.Deployment{}
		if err := d.spokes[c].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, dep); err == nil {
			depState = fmt.Sprintf("%d/%d available (simulated)", dep.Status.AvailableReplicas, ptrOr(dep.Spec.Replicas, 1))
			for _, ctr := range dep.Spec.Template.Spec.Containers {
				if ctr.Name == addon.AgentContainerName {
					image = ctr.Image
				}
			}
		}
		subject, expires := "-", "-"
		if s, err := clientCert(ctx, d.spokes[c]); err == nil {
			if certs, err := pki.ParseCertificates(s.Data[corev1.TLSCertKey]); err == nil && len(certs) > 0 {
				subject = "CN=" + certs[0].Subject.CommonName
				expires = fmt.Sprintf("%s (issuer %s)", certs[0].NotAfter.UTC().Format(time.RFC3339), certs[0].Issuer.CommonName)
			}
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", c, avail, depState, image, subject, expires)
	}
	_ = w.Flush()

	if p := g.Status.Principal; p != nil {
		fmt.Printf("\nPrincipal endpoint handed to the agents: %s:%d (from %s; the load-balancer status is simulated)\n", p.Address, p.Port, p.Source)
	}
	fmt.Println("\nConditions:")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, c := range g.Status.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = w.Flush()

	fmt.Println("\nLook around (kubectl is not needed by the demo itself):")
	fmt.Printf("  hub:       kubectl --kubeconfig %s get goc,placements -n %s; kubectl --kubeconfig %s get managedclusters,managedclusteraddons -A\n",
		d.f.HubKubeconfigPath(), ns, d.f.HubKubeconfigPath())
	fmt.Printf("             kubectl --kubeconfig %s get csr\n", d.f.HubKubeconfigPath())
	for _, c := range d.f.Clusters() {
		fmt.Printf("  %-10s kubectl --kubeconfig %s -n %s get deploy,secret,sa,role,rolebinding\n", c+":", d.f.SpokeKubeconfigPath(c), agentNS)
	}
	fmt.Printf("  logs:      %s (manager: %s)\n", d.f.LogDir(), filepath.Base(d.managerLog))
	d.printApplications(ctx)
	d.printPullModel(ctx)
	fmt.Println("\nSimulated here: the kubelet (the agent and guestbook Deployments' status; no pod runs) and")
	fmt.Println("the principal's load balancer. Everything else is the real thing: API servers, OCM")
	fmt.Println("registration, placement, addon manager and work agents, this project's manager and CSR")
	fmt.Println("signer, Argo CD's server, repo-server and application-controller, Git, each component with")
	fmt.Println("the identity and RBAC its real install gives it (nothing in system:masters). No argocd-agent principal")
	fmt.Println("runs, so each Application was created on its cluster's Argo CD directly; the pull-model")
	fmt.Println("ones came from the hub as ManifestWorks, applied by OCM's work agents.")
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func conditions(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}

func indent(s string) string {
	return strings.ReplaceAll("\n"+strings.TrimSpace(s), "\n", "\n      ")
}
