package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// componentsAddon is the addon that installs Argo CD beside the agent.
var componentsAddon = config.ComponentsAddonName(addonName)

// podWait bounds each wait for pods: the first pull of an image from the fleet's registry and
// Argo CD's start-up take a while on a small machine.
const podWait = 6 * time.Minute

type demo struct {
	f      *fleet.Fleet
	hub    client.Client
	spokes map[string]client.Client
	images nodeapps.Images
	git    *fleet.GitServer
	repo   *fleet.GitRepo
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

// client is the demo's client of "hub" or a managed cluster.
func (d *demo) client(cluster string) client.Client {
	if cluster == "hub" {
		return d.hub
	}
	return d.spokes[cluster]
}

func startImages(ctx context.Context, dir string) *nodeapps.Build {
	progress("building the images in the background: the project's (as make image), Argo CD's and Redis's (from this machine's Debian packages), the guestbook's")
	return nodeapps.StartBuild(ctx, dir, imageTag, progress)
}

func (d *demo) addImages(ctx context.Context, build *nodeapps.Build) error {
	imgs, errs := build.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d.images = imgs
	if err := nodeapps.AddToFleet(ctx, d.f, imgs); err != nil {
		return err
	}
	for _, ref := range imgs.Refs(d.f.RegistryHost()) {
		progress("%s", ref)
	}
	return nil
}

func (d *demo) imageRepository() string { return nodeapps.ManagerRepository(d.f.RegistryHost()) }

// installChart runs the install in the background so that an interrupt does not wait for
// Helm's readiness wait; Helm's own log goes to the fleet's log folder.
func (d *demo) installChart(ctx context.Context) error {
	logPath := filepath.Join(d.f.LogDir(), "helm-install.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		rel, err := chartrender.Install(d.f.HubKubeconfigPath(), filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, testenv.ChartRelease,
			nodeapps.ChartValues(d.f.RegistryHost(), imageTag), podWait, func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) })
		if err == nil {
			progress("release %s revision %d deployed: the manager's pod is Ready after %s (Helm's log: %s)", rel.Name, rel.Version, time.Since(start).Round(100*time.Millisecond), logPath)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("helm install: %w\n%s", err, nodeapps.PodReport(ctx, d.f, "hub", ns))
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *demo) seed(ctx context.Context) error {
	// No predicates: every cluster of the cluster sets bound to the namespace, i.e. both.
	p := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: placement}}
	if err := d.hub.Create(ctx, p); err != nil {
		return err
	}
	// The principal's Service as `--set principal.service.type=NodePort` makes it. No principal
	// runs behind it (its image is argocd-agent's); the manager discovers the endpoint agents
	// dial from it and the hub's real node, as it would on a cluster without load balancers.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app.kubernetes.io/name": "argocd-agent-principal"},
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}
	if err := d.hub.Create(ctx, svc); err != nil {
		return err
	}
	progress("Service %s/argocd-agent-principal: type NodePort, node port %d", ns, svc.Spec.Ports[0].NodePort)
	return nil
}

func (d *demo) applyReadme(ctx context.Context) error {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(readmeExample), &u.Object); err != nil {
		return err
	}
	if err := d.hub.Create(ctx, u); err != nil {
		return err
	}
	g := &v1alpha1.GitOpsCluster{}
	if err := d.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: gocName}, g); err != nil {
		return err
	}
	progress("defaults filled in by the CRD: mode %s, argoCDComponents %s (the components addon installs Argo CD on every selected cluster)",
		g.Spec.ArgoCDAgentAddon.Mode, g.Spec.ArgoCDAgentAddon.ArgoCDComponents)
	return nil
}

// componentWorkloads are what the components addon runs in managed mode.
func componentWorkloads() []client.Object {
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-redis"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-repo-server"}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "argocd-application-controller"}},
	}
}

// waitAddons waits, per cluster, for its addons on the hub, Argo CD's workloads as pods and
// the agent's client certificate.
func (d *demo) waitAddons(ctx context.Context) error {
	for _, c := range d.f.Clusters() {
		var names []string
		if err := d.poll(ctx, c+": ManagedClusterAddOns", 3*time.Minute, func(ctx context.Context) error {
			list := &addonv1alpha1.ManagedClusterAddOnList{}
			if err := d.hub.List(ctx, list, client.InNamespace(c)); err != nil {
				return err
			}
			names = names[:0]
			for _, a := range list.Items {
				names = append(names, a.Name)
			}
			if !slices.Contains(names, addonName) || !slices.Contains(names, componentsAddon) {
				return fmt.Errorf("addons %v", names)
			}
			return nil
		}); err != nil {
			return err
		}
		progress("%s: ManagedClusterAddOns %v created by the manager", c, names)
	}
	for _, c := range d.f.Clusters() {
		spoke := d.spokes[c]
		for _, w := range componentWorkloads() {
			if err := d.poll(ctx, fmt.Sprintf("%s: %s %s/%s ready", c, kind(w), agentNS, w.GetName()), podWait, func(ctx context.Context) error {
				if ok, state := fleet.WorkloadReady(ctx, spoke, w); !ok {
					return fmt.Errorf("%s\n%s", state, nodeapps.PodReport(ctx, d.f, c, agentNS))
				}
				return nil
			}); err != nil {
				return err
			}
			progress("%s: %s %s/%s ready: its pod runs on node %s", c, kind(w), agentNS, w.GetName(), c)
		}
		if err := d.poll(ctx, c+": client certificate", 3*time.Minute, func(ctx context.Context) error {
			_, err := clientCert(ctx, spoke)
			return err
		}); err != nil {
			return err
		}
		progress("%s: the agent's client certificate issued by this project's signer and stored by OCM's registration agent", c)
	}
	return nil
}

func kind(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	}
	return fmt.Sprintf("%T", o)
}

// poll retries check every second up to limit, stopping early when a fleet process or node
// dies or the demo is interrupted.
func (d *demo) poll(ctx context.Context, what string, limit time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		if err := d.f.Err(); err != nil {
			return fmt.Errorf("waiting for %s: %w (logs in %s)", what, err, d.f.LogDir())
		}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not there after %s: %v (logs in %s)", what, limit, err, d.f.LogDir())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
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
