package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// deployGuestbook serves a Git repository with the guestbook on loopback, starts Argo CD on
// every managed cluster, creates the Application there and waits until Argo CD reports it
// Synced and Healthy; the guestbook Deployment's availability is the simulated kubelet's part.
func (d *demo) deployGuestbook(ctx context.Context) error {
	git, err := fleet.StartGitServer(filepath.Join(d.f.Dir(), "git"))
	if err != nil {
		return err
	}
	d.f.OnStop(git.Close)
	if d.repo, err = git.CreateRepo("guestbook"); err != nil {
		return err
	}
	sha, err := d.repo.Commit(fleet.GuestbookFiles(1, guestbookImg), "guestbook: Deployment and Service")
	if err != nil {
		return err
	}
	progress("Git repository %s (served by git http-backend on loopback), main at %.12s", d.repo.URL, sha)

	// The clusters' Argo CDs start at once: most of a start is waiting for CRDs and caches.
	clusters := d.f.Clusters()
	d.argo = map[string]*fleet.ArgoCD{}
	errs := make([]error, len(clusters))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := d.f.StartArgoCD(ctx, c, fleet.ArgoCDOptions{
				Namespace: agentNS,
				// Argo CD's default is 180s; shorter, so a commit to the repository shows soon.
				ArgoCDCM: map[string]string{"timeout.reconciliation": "30s"},
			})
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			d.argo[c] = a
			mu.Unlock()
			progress("%s: Argo CD running in namespace %s (server, repo-server, application-controller; logs %s-argocd-*.log)", c, agentNS, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	for _, c := range clusters {
		app := fleet.NewApplication(guestbookApp, agentNS, d.repo.URL, "guestbook", guestbookNS)
		if err := d.spokes[c].Create(ctx, app); err != nil {
			return fmt.Errorf("%s: creating Application %s: %w", c, guestbookApp, err)
		}
		progress("%s: Application %s/%s created (automated sync from %s, path guestbook)", c, agentNS, guestbookApp, d.repo.URL)
	}
	for _, c := range clusters {
		spoke := d.spokes[c]
		if err := d.poll(ctx, c+": guestbook Deployment applied by Argo CD", func(ctx context.Context) error {
			return spoke.Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, &appsv1.Deployment{})
		}); err != nil {
			return err
		}
		progress("%s: Argo CD synced: Deployment and Service %s/%s are on the cluster's API server", c, guestbookNS, guestbookName)
		if err := d.f.MarkDeploymentAvailable(ctx, c, guestbookNS, guestbookName); err != nil {
			return err
		}
		progress("%s: guestbook Deployment marked available (SIMULATED kubelet)", c)
		if err := d.poll(ctx, c+": Application Synced and Healthy", func(ctx context.Context) error {
			st, err := fleet.GetApplicationState(ctx, spoke, agentNS, guestbookApp)
			if err != nil {
				return err
			}
			if st.Sync != "Synced" || st.Health != "Healthy" {
				return errors.New(st.String())
			}
			return nil
		}); err != nil {
			return err
		}
		progress("%s: Application %s is Synced and Healthy, as reported by Argo CD", c, guestbookApp)
	}
	return nil
}

// printApplications prints, per managed cluster, the Application as Argo CD reports it and the
// workload as the cluster's API server has it.
func (d *demo) printApplications(ctx context.Context) {
	if d.repo == nil {
		return
	}
	fmt.Printf("\nArgo CD Applications (Argo CD v3.6.1 on each managed cluster, source %s):\n", d.repo.URL)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  CLUSTER\tAPPLICATION\tSYNC\tHEALTH\tREVISION\tDEPLOYMENT READY\tSERVICE")
	for _, c := range d.f.Clusters() {
		spoke := d.spokes[c]
		sync, health, rev := "-", "-", "-"
		if st, err := fleet.GetApplicationState(ctx, spoke, agentNS, guestbookApp); err == nil {
			sync, health = st.Sync, st.Health
			if len(st.Revision) >= 12 {
				rev = st.Revision[:12]
			}
		}
		ready := "missing"
		dep := &appsv1.Deployment{}
		if err := spoke.Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, dep); err == nil {
			ready = fmt.Sprintf("%s %d/%d (simulated)", guestbookName, dep.Status.ReadyReplicas, ptrOr(dep.Spec.Replicas, 1))
		}
		svcState := "missing"
		svc := &corev1.Service{}
		if err := spoke.Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, svc); err == nil {
			var ports []string
			for _, p := range svc.Spec.Ports {
				ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
			}
			svcState = fmt.Sprintf("%s %s %s %s", guestbookName, svc.Spec.Type, svc.Spec.ClusterIP, strings.Join(ports, ","))
		}
		fmt.Fprintf(w, "  %s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", c, agentNS, guestbookApp, sync, health, rev, ready, svcState)
	}
	_ = w.Flush()
	fmt.Println("\n  Look for yourself:")
	for _, c := range d.f.Clusters() {
		kc := d.f.SpokeKubeconfigPath(c)
		fmt.Printf("  %-10s kubectl --kubeconfig %s -n %s get applications,appprojects\n", c+":", kc, agentNS)
		fmt.Printf("  %-10s kubectl --kubeconfig %s -n %s get deploy,svc -o wide\n", "", kc, guestbookNS)
	}
	fmt.Println("  A new commit reaches both clusters within timeout.reconciliation (30s here); while the demo\n  runs, the simulated kubelet marks the new generation available. For example:")
	work := filepath.Join(d.f.Dir(), "git", "work", "guestbook")
	fmt.Printf("    sed -i 's/replicas: 1/replicas: 2/' %s\n", filepath.Join(work, "guestbook", "guestbook-ui-deployment.yaml"))
	fmt.Printf("    git -C %s -c user.name=you -c user.email=you@example.invalid commit -qam 'two replicas' && git -C %s push -q origin HEAD:main\n", work, work)
}

// simulateKubelet plays the kubelet for the guestbook Deployments while the fleet runs: when
// Argo CD has rolled out a new generation (say, after a commit), the Deployment is marked
// available, so the Application turns Healthy as it would with real pods.
func (d *demo) simulateKubelet(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		for _, c := range d.f.Clusters() {
			dep := &appsv1.Deployment{}
			if err := d.spokes[c].Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, dep); err != nil {
				continue
			}
			want := ptrOr(dep.Spec.Replicas, 1)
			if dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas == want {
				continue
			}
			if err := d.f.MarkDeploymentAvailable(ctx, c, guestbookNS, guestbookName); err == nil {
				progress("%s: Deployment %s/%s generation %d marked available with %d replica(s) (SIMULATED kubelet)", c, guestbookNS, guestbookName, dep.Generation, want)
			}
		}
	}
}
