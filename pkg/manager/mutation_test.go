package manager_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// The cache shares one copy of repeated strings and small maps between its objects, so a
// cached object changed in place would change others. `make test` runs every suite with
// client-go's cache mutation detector (KUBE_CACHE_MUTATION_DETECTOR=true), which crashes the
// test binary when a cached object differs from its copy taken when it was stored. This test
// runs itself as a child process, with the binary's cache options, to show the detector sees
// through them: a child that only reads exits cleanly, one that changes a cached Secret's
// labels in place crashes with client-go's "cache ... modified".
func TestCacheMutationDetectorCatchesAnObjectChangedInPlace(t *testing.T) {
	if mode := os.Getenv("CACHE_MUTATION_CHILD"); mode != "" {
		readCachedSecret(t, os.Getenv(childKubeconfigEnv), mode == "change")
		return
	}
	if testing.Short() {
		t.Skip("needs a kube-apiserver; skipped with -short")
	}
	// The API server is this process's: a child that crashes runs no cleanup, and would leave
	// one of its own running on the machine.
	env := testenv.StartForTest(t, testenv.Options{})
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, env.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}})
	ours := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	mustCreate(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "cluster-a", Labels: ours}})
	for _, tc := range []struct {
		mode      string
		wantCrash bool
	}{{"read", false}, {"change", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCacheMutationDetectorCatchesAnObjectChangedInPlace$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "KUBE_CACHE_MUTATION_DETECTOR=true", "CACHE_MUTATION_CHILD="+tc.mode, childKubeconfigEnv+"="+kubeconfig)
			out, err := cmd.CombinedOutput()
			crashed := err != nil && strings.Contains(string(out), "modified")
			if crashed != tc.wantCrash || (!tc.wantCrash && err != nil) {
				t.Fatalf("child that does %q: crashed on a changed cache %v, want %v; exit %v, output:\n%s", tc.mode, crashed, tc.wantCrash, err, tail(out))
			}
		})
	}
}

// childKubeconfigEnv names the kubeconfig of the parent's API server for the child process.
const childKubeconfigEnv = "CACHE_MUTATION_KUBECONFIG"

// readCachedSecret reads the parent's labelled Secret through a cache built with the binary's
// options, without a copy, and with change set alters its labels in place; then it waits long
// enough for the detector's next comparison.
func readCachedSecret(t *testing.T, kubeconfig string, change bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	co := manager.ControllerOptions(scheme, manager.DefaultOptions()).Cache
	co.Scheme = scheme
	cc, err := cache.New(cfg, co)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cc.Start(ctx) }()
	s := &corev1.Secret{}
	deadline := time.Now().Add(30 * time.Second)
	for cc.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: "cluster-a"}, s, client.UnsafeDisableDeepCopy) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the Secret never reached the cache")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if change {
		s.Labels["changed"] = "in place"
	}
	// The detector compares once a second.
	time.Sleep(3 * time.Second)
}

func tail(out []byte) string {
	const keep = 4000
	if len(out) > keep {
		return "..." + string(out[len(out)-keep:])
	}
	return string(out)
}
