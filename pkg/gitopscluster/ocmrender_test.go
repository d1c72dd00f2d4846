package gitopscluster_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The suite's hub has no OCM controllers: what OCM makes of the objects the manager writes is
// checked by handing them to OCM's own controllers (built by hack/ocm-binaries.sh at the
// release the local fleet runs), each on an API server of its own, so that no other test's
// objects are touched: renderComponentsWithOCM runs the addon-manager and returns what it
// renders per cluster, decideWithOCM runs the placement controller and returns what it decides.

// ocmBinaries is the folder of OCM's binaries: $OCM_BINARIES_DIR, else the script's answer.
func ocmBinaries(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("OCM_BINARIES_DIR"); dir != "" {
		return dir
	}
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "ocm-binaries.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/ocm-binaries.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// renderComponentsWithOCM copies goc's components addon (its ClusterManagementAddOn entry,
// Placement, AddOnTemplates and AddOnDeploymentConfigs), the clusters' ManagedClusters and
// their components ManagedClusterAddOns from the suite's hub to a new API server, decides the
// clusters on the components' Placement there, runs OCM's addon-manager against it, and
// returns the manifests of the ManifestWork it renders for each cluster.
func renderComponentsWithOCM(t *testing.T, goc *v1alpha1.GitOpsCluster, clusters ...string) map[string][]*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	bin := ocmBinaries(t)
	env := testenv.StartForTest(t, testenv.Options{})
	c := env.Client
	const hubNS = "open-cluster-management-hub"
	for _, ns := range append([]string{hubNS, goc.Namespace}, clusters...) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range clusters {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: name}, mc); err != nil {
			t.Fatal(err)
		}
		status := mc.Status
		copyTo(t, c, mc)
		mc.Status = status
		if err := c.Status().Update(ctx, mc); err != nil {
			t.Fatal(err)
		}
		mca := &addonv1alpha1.ManagedClusterAddOn{}
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: name, Name: componentsAddon}, mca); err != nil {
			t.Fatal(err)
		}
		copyTo(t, c, mca)
	}
	var templates addonv1alpha1.AddOnTemplateList
	if err := k8s.List(ctx, &templates, client.MatchingLabels(names.OwnerLabels(goc))); err != nil {
		t.Fatal(err)
	}
	for i := range templates.Items {
		copyTo(t, c, &templates.Items[i])
	}
	var adcs addonv1alpha1.AddOnDeploymentConfigList
	if err := k8s.List(ctx, &adcs, client.InNamespace(goc.Namespace), client.MatchingLabels(names.OwnerLabels(goc))); err != nil {
		t.Fatal(err)
	}
	for i := range adcs.Items {
		copyTo(t, c, &adcs.Items[i])
	}
	placement := &clusterv1beta1.Placement{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: names.ComponentsPlacementName(goc)}, placement); err != nil {
		t.Fatal(err)
	}
	copyTo(t, c, placement)
	if err := fakehub.SetDecisionPage(ctx, c, goc.Namespace, placement.Name, 1, clusters); err != nil {
		t.Fatal(err)
	}
	// Only goc's entry: the suite's other tests have entries of their own there.
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: componentsAddon}, cma); err != nil {
		t.Fatal(err)
	}
	var entries []addonv1alpha1.PlacementStrategy
	for _, p := range cma.Spec.InstallStrategy.Placements {
		if p.Namespace == goc.Namespace && p.Name == placement.Name {
			entries = append(entries, p)
		}
	}
	cma.Spec.InstallStrategy.Placements = entries
	copyTo(t, c, cma)

	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	startOCMProcess(t, filepath.Join(bin, "addon"), "manager", "--kubeconfig="+kubeconfig, "--namespace="+hubNS, "--disable-leader-election")

	out := map[string][]*unstructured.Unstructured{}
	poll.Until(t, "OCM's addon-manager renders the components for every cluster", 2*time.Minute, func() error {
		for _, name := range clusters {
			var works workv1.ManifestWorkList
			if err := c.List(ctx, &works, client.InNamespace(name), client.MatchingLabels{addonv1alpha1.AddonLabelKey: componentsAddon}); err != nil {
				return err
			}
			if len(works.Items) == 0 {
				mca := &addonv1alpha1.ManagedClusterAddOn{}
				_ = c.Get(ctx, types.NamespacedName{Namespace: name, Name: componentsAddon}, mca)
				return fmt.Errorf("%s: no ManifestWork yet; its addon's conditions: %+v", name, mca.Status.Conditions)
			}
			var objs []*unstructured.Unstructured
			for _, w := range works.Items {
				for _, m := range w.Spec.Workload.Manifests {
					o := &unstructured.Unstructured{}
					if err := o.UnmarshalJSON(m.Raw); err != nil {
						return err
					}
					objs = append(objs, o)
				}
			}
			out[name] = objs
		}
		return nil
	})
	return out
}

// decideWithOCM hands the Placement namespace/name and the clusters' ManagedClusters (their
// claims included) from the suite's hub to OCM's placement controller on an API server of its
// own, with one cluster set of every cluster bound to the namespace, and returns the clusters
// it decides.
func decideWithOCM(t *testing.T, namespace, name string, clusters ...string) []string {
	t.Helper()
	ctx := context.Background()
	bin := ocmBinaries(t)
	env := testenv.StartForTest(t, testenv.Options{})
	c := env.Client
	// The placement controller also watches the scores addons publish.
	api, err := testenv.OCMAPIDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{
		filepath.Join(api, "cluster", "v1alpha1", "0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml")}}); err != nil {
		t.Fatal(err)
	}
	const hubNS = "open-cluster-management-hub"
	for _, ns := range []string{hubNS, namespace} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range clusters {
		mc := &clusterv1.ManagedCluster{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: n}, mc); err != nil {
			t.Fatal(err)
		}
		status := mc.Status
		copyTo(t, c, mc)
		mc.Status = status
		if err := c.Status().Update(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	set := &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "every-cluster"},
		Spec: clusterv1beta2.ManagedClusterSetSpec{ClusterSelector: clusterv1beta2.ManagedClusterSelector{
			SelectorType: clusterv1beta2.LabelSelector, LabelSelector: &metav1.LabelSelector{}}}}
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: set.Name},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set.Name}}
	for _, o := range []client.Object{set, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// What OCM's registration controller reports for a binding whose set exists.
	meta.SetStatusCondition(&binding.Status.Conditions, metav1.Condition{Type: clusterv1beta2.ClusterSetBindingBoundType, Status: metav1.ConditionTrue, Reason: "ClusterSetBound"})
	if err := c.Status().Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	pl := &clusterv1beta1.Placement{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, pl); err != nil {
		t.Fatal(err)
	}
	copyTo(t, c, pl)

	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	startOCMProcess(t, filepath.Join(bin, "placement"), "controller", "--kubeconfig="+kubeconfig, "--namespace="+hubNS, "--disable-leader-election")
	var decided []string
	poll.Until(t, "OCM's placement controller decides "+name, 2*time.Minute, func() error {
		live := &clusterv1beta1.Placement{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, live); err != nil {
			return err
		}
		if meta.FindStatusCondition(live.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied) == nil {
			return fmt.Errorf("not scheduled yet: %+v", live.Status)
		}
		got, pages, err := ownership.SelectedClustersAndPages(ctx, c, namespace, name)
		if err != nil {
			return err
		}
		if reason := ownership.SelectionUnknown(live, got, pages); reason != "" {
			return errors.New(reason)
		}
		decided = sets.List(got)
		return nil
	})
	return decided
}

// copyTo creates obj, read from the suite's hub, on c: without what the API server set and
// without owners, which do not exist there.
func copyTo(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetManagedFields(nil)
	obj.SetOwnerReferences(nil)
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetFinalizers(nil)
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("copying %T %s: %v", obj, obj.GetName(), err)
	}
}

// startOCMProcess runs one of OCM's binaries until the test ends (or the test binary does).
func startOCMProcess(t *testing.T, path string, args ...string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logFile, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(path)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, append(args, "--listen=127.0.0.1:"+strconv.Itoa(port))...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			if raw, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("%s log (last 4 KB):\n%s", filepath.Base(path), tail(raw, 4096))
			}
		}
		_ = logFile.Close()
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// podImages returns, for the workload of that kind and name among objs, the image of each
// container and init container by name.
func podImages(t *testing.T, objs []*unstructured.Unstructured, kind, name string) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind || o.GetName() != name {
			continue
		}
		out := map[string]string{}
		for _, field := range []string{"initContainers", "containers"} {
			list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
			for _, c := range list {
				m := c.(map[string]any)
				out[m["name"].(string)] = m["image"].(string)
			}
		}
		return out
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}
