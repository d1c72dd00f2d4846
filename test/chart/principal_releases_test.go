package chart

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// principalFlags are the principal flags of each supported release that the chart may pass:
// v0.9.0's as the chart has run it, v0.10.0's read from cmd/argocd-agent/principal.go of its
// release line (docs/compatibility.md).
var principalFlags = map[string][]string{
	"v0.9.0": {"namespace", "listen-port", "tls-secret-name", "tls-ca-secret-name", "resource-proxy-secret-name", "resource-proxy-ca-secret-name",
		"jwt-secret-name", "require-client-certs", "auth", "allowed-namespaces", "namespace-create-enable", "namespace-create-pattern",
		"destination-based-mapping", "redis-server-address", "metrics-port", "healthz-port"},
	"v0.10.0": {"namespace", "listen-port", "tls-secret-name", "tls-ca-secret-name", "resource-proxy-secret-name", "resource-proxy-ca-secret-name",
		"jwt-secret-name", "require-client-certs", "auth", "allowed-namespaces", "namespace-create-enable", "namespace-create-pattern",
		"destination-based-mapping", "redis-server-address", "metrics-port", "healthz-port", "tls-min-version", "client-cert-subject-match"},
}

// TestPrincipalRunsOnEachRelease: the chart's principal runs the default pair's image, passes
// only flags both supported releases have, and takes from argocd-agent's own principal chart
// its probe timings and memory limit, not its fixed user IDs (see principal.yaml).
func TestPrincipalRunsOnEachRelease(t *testing.T) {
	objs, err := render(t, map[string]any{"principal": map[string]any{"install": true, "destinationBasedMapping": true,
		"namespaceCreate": map[string]any{"enable": true, "pattern": "^agent-"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := find(objs, "Deployment", "argocd-agent-principal")
	if d == nil {
		t.Fatal("no principal Deployment")
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object, &dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != version.DefaultAgentImage {
		t.Errorf("the principal runs %s, want the default pair's %s", c.Image, version.DefaultAgentImage)
	}
	for _, arg := range principalArgs(t, d)[1:] {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		for _, p := range version.Pairs() {
			if !slices.Contains(principalFlags[p.Agent], name) {
				t.Errorf("flag --%s is not a flag of argocd-agent %s's principal", name, p.Agent)
			}
		}
	}
	r, l := c.ReadinessProbe, c.LivenessProbe
	if r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/healthz" || r.TimeoutSeconds != 2 || r.PeriodSeconds != 10 || r.FailureThreshold != 3 {
		t.Errorf("readiness probe %+v, want /healthz every 10 s, 2 s timeout, 3 failures", r)
	}
	if l == nil || l.TCPSocket == nil || l.TimeoutSeconds != 2 || l.PeriodSeconds != 10 || l.FailureThreshold != 3 {
		t.Errorf("liveness probe %+v, want the healthz port every 10 s, 2 s timeout, 3 failures", l)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser != nil ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext %+v", sc)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsUser != nil || psc.FSGroup != nil || psc.SeccompProfile == nil {
		t.Errorf("pod securityContext %+v: want RuntimeDefault seccomp and no fixed IDs", psc)
	}
	if got := c.Resources.Limits.Memory().String(); got != "4Gi" {
		t.Errorf("memory limit %s, want 4Gi", got)
	}
}

// TestPrincipalReadsItsBlocklistOnARealAPIServer: argocd-agent v0.10.0's principal (with mTLS)
// gets argocd-agent-tls-blocklist once at start and then lists and watches it by name; the
// chart's Role lets it, as real requests of its ServiceAccount, and lets it write none of it.
// v0.9.0 has no blocklist, and nothing more is asked of the Role for it.
func TestPrincipalReadsItsBlocklistOnARealAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	for _, ns := range []string{releaseNS, principalNS} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: ledger.BlocklistName},
		Data: map[string]string{strings.Repeat("AB", 32): ""}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(helmConfig(t, kubeconfig))
	install.ReleaseName, install.Namespace, install.Timeout = releaseName, releaseNS, time.Minute
	if _, err := install.Run(loadChart(t), map[string]any{"principal": map[string]any{"install": true, "namespace": principalNS}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	asSA := testenv.ServiceAccount(principalNS, principalSA).Impersonating(env.Config)
	cms := kubernetes.NewForConfigOrDie(asSA).CoreV1().ConfigMaps(principalNS)
	byName := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ledger.BlocklistName).String()}

	var cm *corev1.ConfigMap
	poll.Until(t, "the principal to get its blocklist at start (blocklist.LoadFromConfigMap)", testenv.RBACCatchUp, func() error {
		cm, err = cms.Get(ctx, ledger.BlocklistName, metav1.GetOptions{})
		return err
	})
	if len(cm.Data) != 1 {
		t.Errorf("blocklist read as %v", cm.Data)
	}
	list, err := cms.List(ctx, byName)
	if err != nil || len(list.Items) != 1 {
		t.Errorf("the principal's blocklist informer cannot list it by name: %v (%d items)", err, len(list.Items))
	}
	opts := byName
	if list != nil {
		opts.ResourceVersion = list.ResourceVersion
	}
	w, err := cms.Watch(ctx, opts)
	if err != nil {
		t.Errorf("the principal's blocklist informer cannot watch it by name: %v", err)
	} else {
		w.Stop()
	}
	cm.Data = map[string]string{}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
		t.Error("the principal may update its blocklist, which only the manager writes")
	}
	if err := cms.Delete(ctx, ledger.BlocklistName, metav1.DeleteOptions{}); err == nil {
		t.Error("the principal may delete its blocklist (deleting it unblocks every certificate)")
	}
}
