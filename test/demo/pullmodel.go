package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// pullNS is the workload namespace of the pull-model guestbook on each cluster.
const pullNS = "guestbook-pull"

// deployPullModel shows the basic pull model: Argo CD's CRDs (and its applicationset-controller)
// on the hub, one hub Application per cluster marked for it; the manager delivers each as a
// ManifestWork, OCM's work agent applies it, the cluster's Argo CD syncs it, and the status comes
// back to the hub Application.
func (d *demo) deployPullModel(ctx context.Context) error {
	// The API server warns that Argo CD's finalizer name has no path; the demo's own client
	// would print that through controller-runtime's unset logger as a stack trace.
	ctrllog.SetLogger(logr.Discard())
	if _, err := d.f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ApplicationSetOnly: true}); err != nil {
		return err
	}
	progress("hub: Argo CD's CRDs and applicationset-controller up; the manager starts its pull model within a minute")
	// The hub admin's step: the pull model delivers an Application only to clusters of a set
	// bound to its namespace.
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: d.f.ClusterSet()},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: d.f.ClusterSet()}}
	if err := d.hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding ManagedClusterSet %s to namespace %s: %w", d.f.ClusterSet(), fleet.ArgoCDNamespace, err)
	}
	progress("hub: ManagedClusterSet %s bound to namespace %s, whose Applications may now reach its clusters", d.f.ClusterSet(), fleet.ArgoCDNamespace)
	// Each cluster admin's step (README, basic pull model): OCM's work agent may not write
	// Applications until this ClusterRole aggregates into its role.
	for _, c := range d.f.Clusters() {
		if err := d.spokes[c].Create(ctx, spoke.PullModelWorkAgentRole()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: granting OCM's work agent the pull model's rights: %w", c, err)
		}
		progress("%s: ClusterRole %s applied (the cluster admin's step), so OCM's work agent may write Applications", c, spoke.PullModelWorkAgentRoleName)
	}
	for _, c := range d.f.Clusters() {
		app := fleet.NewApplication(pullAppName(c), fleet.ArgoCDNamespace, d.repo.URL, "guestbook", pullNS)
		app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
		app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: c, pullmodel.AnnotationSkipReconcile: "true"})
		app.SetFinalizers([]string{pullmodel.ResourcesFinalizer})
		if err := d.hub.Create(ctx, app); err != nil {
			return fmt.Errorf("creating hub Application %s: %w", app.GetName(), err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, c := range d.f.Clusters() {
		for {
			st, err := fleet.GetApplicationState(ctx, d.hub, fleet.ArgoCDNamespace, pullAppName(c))
			if err == nil && st.Sync == "Synced" && st.Health == "Healthy" {
				progress("%s: hub Application %s is Synced and Healthy, fed back from the cluster", c, pullAppName(c))
				break
			}
			// The kubelet's part (simulated): the guestbook Deployment becomes available.
			dep := &appsv1.Deployment{}
			if d.spokes[c].Get(ctx, client.ObjectKey{Namespace: pullNS, Name: guestbookName}, dep) == nil && dep.Status.AvailableReplicas == 0 {
				_ = d.f.MarkDeploymentAvailable(ctx, c, pullNS, guestbookName)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: hub Application %s not Synced Healthy within 5 minutes: %v %v", c, pullAppName(c), st, err)
			}
			time.Sleep(2 * time.Second)
		}
	}
	return nil
}

func pullAppName(cluster string) string { return "guestbook-" + cluster }

// printPullModel prints the hub Applications of the pull model with their ManifestWorks.
func (d *demo) printPullModel(ctx context.Context) {
	fmt.Printf("\nBasic pull model (hub Applications delivered as ManifestWorks; status fed back):\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  HUB APPLICATION\tCLUSTER\tSYNC\tHEALTH\tMANIFESTWORK")
	for _, c := range d.f.Clusters() {
		sync, health := "-", "-"
		if st, err := fleet.GetApplicationState(ctx, d.hub, fleet.ArgoCDNamespace, pullAppName(c)); err == nil {
			sync, health = st.Sync, st.Health
		}
		fmt.Fprintf(w, "  %s/%s\t%s\t%s\t%s\t%s\n", fleet.ArgoCDNamespace, pullAppName(c), c, sync, health, d.workName(ctx, c))
	}
	_ = w.Flush()
	fmt.Printf("  hub:       kubectl --kubeconfig %s -n %s get applications; kubectl --kubeconfig %s get manifestworks -A -l %s\n",
		d.f.HubKubeconfigPath(), fleet.ArgoCDNamespace, d.f.HubKubeconfigPath(), pullmodel.LabelPull)
}

func (d *demo) workName(ctx context.Context, cluster string) string {
	app := pullmodel.NewApplication()
	if err := d.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: pullAppName(cluster)}, app); err != nil {
		return "-"
	}
	return cluster + "/" + pullmodel.WorkName(app.GetName(), string(app.GetUID()))
}
