package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
)

// pullNS is the workload namespace of the pull-model guestbook on each cluster.
const pullNS = "guestbook-pull"

// deployPullModel shows the basic pull model: one hub Application per cluster marked for it;
// the manager's pod delivers each as a ManifestWork, OCM's work agent applies it, the
// cluster's Argo CD pods sync it, and the status comes back to the hub Application.
func (d *demo) deployPullModel(ctx context.Context) error {
	if err := fleet.EnsureNamespaces(ctx, d.hub, fleet.ArgoCDNamespace); err != nil {
		return err
	}
	// The hub admin's steps: the cluster set bound to Argo CD's namespace (the pull model
	// delivers an Application only to clusters of a set bound to its namespace), and the
	// default AppProject there, which decides what the delivered Applications may deploy.
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.ArgoCDNamespace, Name: d.f.ClusterSet()},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: d.f.ClusterSet()}}
	if err := d.hub.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding ManagedClusterSet %s to namespace %s: %w", d.f.ClusterSet(), fleet.ArgoCDNamespace, err)
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "default", "namespace": fleet.ArgoCDNamespace},
		"spec": map[string]any{
			"sourceRepos":  []any{"*"},
			"destinations": []any{map[string]any{"server": "*", "namespace": "*"}},
		},
	}}
	if err := d.hub.Create(ctx, project); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the hub's AppProject default: %w", err)
	}
	progress("hub: ManagedClusterSet %s bound to namespace %s and AppProject %s/default created (the hub admin's steps)", d.f.ClusterSet(), fleet.ArgoCDNamespace, fleet.ArgoCDNamespace)
	for _, c := range d.f.Clusters() {
		app := fleet.NewApplication(pullAppName(c), fleet.ArgoCDNamespace, d.repo.URL, guestbook, pullNS)
		app.SetLabels(map[string]string{pullmodel.LabelPull: "true"})
		app.SetAnnotations(map[string]string{pullmodel.AnnotationCluster: c, pullmodel.AnnotationSkipReconcile: "true"})
		if err := d.hub.Create(ctx, app); err != nil {
			return fmt.Errorf("creating hub Application %s: %w", app.GetName(), err)
		}
	}
	for _, c := range d.f.Clusters() {
		if err := d.poll(ctx, "hub Application "+pullAppName(c)+" Synced and Healthy", podWait, func(ctx context.Context) error {
			st, err := fleet.GetApplicationState(ctx, d.hub, fleet.ArgoCDNamespace, pullAppName(c))
			if err != nil {
				return err
			}
			if st.Sync != "Synced" || st.Health != "Healthy" {
				return fmt.Errorf("%s\n%s", st, nodeapps.PodReport(ctx, d.f, c, pullNS))
			}
			return nil
		}); err != nil {
			return err
		}
		progress("%s: hub Application %s is Synced and Healthy, fed back from the cluster's Argo CD pods", c, pullAppName(c))
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
