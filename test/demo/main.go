// Command demo runs argocd-agent-addon as a user runs it, on a local Open Cluster Management
// fleet whose clusters have real nodes (test/fleet, Options.RealNodes): a hub and two managed
// clusters, each its own etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and
// a node with containerd, kubelet and kube-proxy, with OCM v1.2.1's hub controllers and
// klusterlet agents. Images are built on this machine (the project's as `make image` builds it,
// Argo CD's from the pinned argocd binary, Redis's from Debian's package) and served by the
// fleet's registry. The demo installs the chart with Helm's SDK, so the manager runs as a pod;
// creates a Placement and the principal's Service (type NodePort: the manager discovers the
// endpoint from the hub's node) and applies the upstream README's GitOpsCluster unchanged, whose
// components addon installs Argo CD (redis, repo-server, application-controller) as pods on both
// managed clusters. Those pods sync a guestbook from a Git server on this machine, on each
// cluster and through the basic pull model. It prints the clusters, the addons, every pod and
// the Applications, and runs until interrupted (or, with --exit, stops after printing);
// SIGINT or SIGTERM stops everything it started.
//
// Nothing is simulated. What does not run: argocd-agent itself (agent and principal), whose
// image cannot be built here; the agent pods wait for it (ImagePullBackOff) and the output says
// how to provide it. So the Applications are created on each cluster's Argo CD directly.
//
// Real nodes need root and hack/node-packages.sh's packages; --preflight checks that and says
// what to run.
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
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// readmeExample is the upstream README's GitOpsCluster, applied unchanged.
const readmeExample = testenv.ReadmeGitOpsCluster

const (
	ns        = "open-cluster-management"
	gocName   = "my-gitops-cluster"
	placement = "argocd-placement"
	addonName = addon.DefaultAddonName
	agentNS   = addon.DefaultAgentInstallNamespace
	imageTag  = "demo"
)

func main() {
	exit := flag.Bool("exit", false, "stop after printing the summary")
	preflight := flag.Bool("preflight", false, "only check that the demo runs as root, as real nodes need")
	dir := flag.String("dir", "", "run directory for logs, kubeconfigs and data; default bin/fleet/<time>-<pid>")
	flag.Parse()
	check := checkNodes
	if *preflight {
		// Before make fetches the binaries and installs the packages (TEST_ENV, as root).
		check = checkRoot
	}
	if err := check(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	if *preflight {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// Not stopped before the demo ends: a second Ctrl-C must not kill it while it cleans up.
	defer stop()
	err := run(ctx, *dir, *exit)
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Println("demo: interrupted; everything it started is stopped")
		stop()
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// checkRoot says what to run when the demo cannot run real nodes for want of root.
func checkRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("the demo runs real nodes (containerd, kubelet, network namespaces, cgroups) and needs root:\n" +
			"  sudo hack/node-packages.sh   # once: containerd, runc, CNI plugins, iptables... and the images' Debian packages\n" +
			"  sudo make demo")
	}
	return nil
}

// checkNodes says what to run when this machine cannot run real nodes.
func checkNodes() error {
	if err := checkRoot(); err != nil {
		return err
	}
	if err := node.Available(); err != nil {
		return fmt.Errorf("real nodes cannot run here: %w\n  run, as root: hack/node-packages.sh", err)
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
		return errors.New("the Redis image is assembled from this machine's redis-server package, which is missing\n  run, as root: hack/node-packages.sh")
	}
	return nil
}

var begin = time.Now()

func step(format string, args ...any) {
	fmt.Printf("==> [%5.1fs] "+format+"\n", append([]any{time.Since(begin).Seconds()}, args...)...)
}

func progress(format string, args ...any) {
	fmt.Printf("    [%5.1fs] "+format+"\n", append([]any{time.Since(begin).Seconds()}, args...)...)
}

func run(ctx context.Context, dir string, exit bool) (err error) {
	// Only a signal's cancellation is an interruption: main cancels ctx too once run returns.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			step("interrupted: stopping everything (nodes, pods, processes); a few seconds")
		case <-finished:
		}
	}()
	// The API server warns that Argo CD's finalizer name has no path; controller-runtime's unset
	// logger would print that as a stack trace.
	ctrllog.SetLogger(logr.Discard())

	step("building or locating the binaries (kube-apiserver, etcd, kube-controller-manager, kubelet, kube-proxy, kube-scheduler v1.36; OCM v1.2.1; Argo CD v3.6.1); minutes the first time")
	_, _, k8sTime, ocmTime, err := fleet.Binaries()
	if err != nil {
		return err
	}
	argoDir, argoTime, err := fleet.ArgoCDBinaries()
	if err != nil {
		return err
	}
	nodeStart := time.Now()
	if _, err := fleet.NodeBinaries(); err != nil {
		return err
	}
	progress("kubernetes binaries ready in %s, OCM in %s, Argo CD in %s, node binaries in %s", k8sTime.Round(time.Millisecond),
		ocmTime.Round(time.Millisecond), argoTime.Round(time.Millisecond), time.Since(nodeStart).Round(time.Millisecond))

	// The images build while the fleet starts; the tarballs are scratch (Argo CD's and Redis's
	// are cached by content elsewhere), removed when the demo ends.
	imgDir, err := os.MkdirTemp("", "argocd-agent-addon-demo-images-")
	if err != nil {
		return err
	}
	build := startImages(ctx, imgDir)
	defer func() {
		// Nothing the demo started may outlive it: the builds end before their folder goes.
		_, _ = build.Wait()
		_ = os.RemoveAll(imgDir)
	}()

	step("starting a local OCM fleet with real nodes: a hub and managed clusters cluster1 and cluster2, each with a node (containerd, kubelet, kube-proxy)")
	f, err := fleet.Start(ctx, fleet.Options{
		Clusters:         []string{"cluster1", "cluster2"},
		BindingNamespace: ns,
		RealNodes:        true,
		// Argo CD's CRDs on the hub, as on a hub with Argo CD: the pull model delivers its
		// Applications.
		HubCRDPaths: []string{filepath.Join(argoDir, "crds")},
		Dir:         dir,
		Logf:        progress,
	})
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the fleet (pods, nodes, processes)")
		if stopErr := f.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the fleet: %w", stopErr))
		}
		if left := f.NodeLeftovers(); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("the nodes left behind: %s", strings.Join(left, "; ")))
		}
		step("stopped; logs and kubeconfigs stay in %s", f.Dir())
	}()
	d := &demo{f: f}
	if err := d.connect(); err != nil {
		return err
	}

	step("adding the images to the fleet's registry %s and to every node's containerd", f.RegistryHost())
	if err := d.addImages(ctx, build); err != nil {
		return err
	}

	step("helm install %s ./charts/argocd-agent-addon --namespace %s (Helm's SDK) with image.repository=%s, spoke.imageRegistry=%s",
		testenv.ChartRelease, ns, d.imageRepository(), f.RegistryHost())
	if err := d.installChart(ctx); err != nil {
		return err
	}

	step("creating what a user has on the hub: Placement %s (all clusters of the bound set %q) and the principal's Service", placement, f.ClusterSet())
	if err := d.seed(ctx); err != nil {
		return err
	}

	step("applying the upstream README's GitOpsCluster unchanged:%s", indent(readmeExample))
	if err := d.applyReadme(ctx); err != nil {
		return err
	}

	step("waiting for the addons: Argo CD's pods on every managed cluster, the agents' client certificates")
	if err := d.waitAddons(ctx); err != nil {
		return err
	}

	step("deploying a guestbook with the Argo CD pods of every managed cluster, from a Git server on this machine")
	if err := d.deployGuestbook(ctx); err != nil {
		return err
	}
	step("the basic pull model: the guestbook from hub Applications, delivered as ManifestWorks")
	if err := d.deployPullModel(ctx); err != nil {
		return err
	}
	d.printSummary(ctx)
	if exit {
		fmt.Println("\n--exit: the fleet stops now (logs and kubeconfigs stay); run without it to keep the fleet up.")
		return nil
	}
	fmt.Println("\nThe fleet keeps running; press Ctrl-C to stop everything.")
	<-ctx.Done()
	return nil
}

func indent(s string) string {
	return strings.ReplaceAll("\n"+strings.TrimSpace(s), "\n", "\n      ")
}
