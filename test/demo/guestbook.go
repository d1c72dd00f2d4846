package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
)

const guestbook = nodeapps.Guestbook // Application, namespace, Deployment, Service

// deployGuestbook serves a Git repository with the guestbook on the hub node's host address,
// which every pod reaches, creates the Application on every managed cluster's Argo CD and
// waits until those pods have synced it and report it Healthy: its own pod runs and is ready.
func (d *demo) deployGuestbook(ctx context.Context) error {
	var err error
	if d.git, err = fleet.StartGitServerOn(filepath.Join(d.f.Dir(), "git"), d.f.HostAddress()); err != nil {
		return err
	}
	d.f.OnStop(d.git.Close)
	if d.repo, err = d.git.CreateRepo(guestbook); err != nil {
		return err
	}
	sha, err := d.repo.Commit(nodeapps.GuestbookFiles(d.images.HelloRef(d.f.RegistryHost())), "guestbook: Deployment, Service and ConfigMap")
	if err != nil {
		return err
	}
	progress("Git repository %s (git http-backend on the hub node's host address), main at %.12s", d.repo.URL, sha)

	for _, c := range d.f.Clusters() {
		app := nodeapps.GuestbookApp(agentNS, d.repo.URL)
		if err := d.spokes[c].Create(ctx, app); err != nil {
			return fmt.Errorf("%s: creating Application %s: %w", c, guestbook, err)
		}
		progress("%s: Application %s/%s created (automated sync of %s, path %s)", c, agentNS, guestbook, d.repo.URL, guestbook)
	}
	for _, c := range d.f.Clusters() {
		spoke := d.spokes[c]
		if err := d.poll(ctx, c+": Application "+guestbook+" Synced and Healthy", podWait, func(ctx context.Context) error {
			st, err := fleet.GetApplicationState(ctx, spoke, agentNS, guestbook)
			if err != nil {
				return err
			}
			if st.Sync != "Synced" || st.Health != "Healthy" {
				return fmt.Errorf("%s\n%s", st, nodeapps.PodReport(ctx, d.f, c, guestbook))
			}
			return nil
		}); err != nil {
			return err
		}
		progress("%s: Application %s Synced and Healthy, as Argo CD's pods report it; the guestbook's pod is ready", c, guestbook)
	}
	if d.repo.Requests() == 0 {
		return errors.New("the Git server served nothing, yet the Applications are Synced")
	}
	return nil
}

// printApplications prints, per managed cluster, the Application as Argo CD reports it and the
// workload as the cluster has it.
func (d *demo) printApplications(ctx context.Context) {
	if d.repo == nil {
		return
	}
	fmt.Printf("\nArgo CD Applications (synced by the components addon's Argo CD pods, source %s):\n", d.repo.URL)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tAPPLICATION\tSYNC\tHEALTH\tREVISION\tDEPLOYMENT READY\tSERVICE")
	for _, c := range d.f.Clusters() {
		spoke := d.spokes[c]
		sync, health, rev := "-", "-", "-"
		if st, err := fleet.GetApplicationState(ctx, spoke, agentNS, guestbook); err == nil {
			sync, health = st.Sync, st.Health
			if len(st.Revision) >= 12 {
				rev = st.Revision[:12]
			}
		}
		ready := "missing"
		dep := &appsv1.Deployment{}
		if err := spoke.Get(ctx, client.ObjectKey{Namespace: guestbook, Name: guestbook}, dep); err == nil {
			ready = fmt.Sprintf("%s %d/%d", guestbook, dep.Status.ReadyReplicas, ptrOr(dep.Spec.Replicas, 1))
		}
		svcState := "missing"
		svc := &corev1.Service{}
		if err := spoke.Get(ctx, client.ObjectKey{Namespace: guestbook, Name: guestbook}, svc); err == nil {
			var ports []string
			for _, p := range svc.Spec.Ports {
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
			svcState = fmt.Sprintf("%s %s %s %s", guestbook, svc.Spec.Type, svc.Spec.ClusterIP, strings.Join(ports, ","))
		}
		fmt.Fprintf(w, "  %s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", c, agentNS, guestbook, sync, health, rev, ready, svcState)
	}
	_ = w.Flush()
	fmt.Println("\n  A new commit reaches both clusters within Argo CD's timeout.reconciliation (180s). For example:")
	work := filepath.Join(d.f.Dir(), "git", "work", guestbook)
	fmt.Printf("    sed -i 's/^  selector:/  replicas: 2\\n  selector:/' %s\n", filepath.Join(work, guestbook, "deployment.yaml"))
	fmt.Printf("    git -C %s -c user.name=you -c user.email=you@example.invalid commit -qam 'two replicas' && git -C %s push -q origin HEAD:main\n", work, work)
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
