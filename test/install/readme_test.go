package install

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// readmeSteps returns the commands of the README's install steps 2 (helm install) and 3
// (kubectl), as written.
func readmeSteps(t *testing.T) (helm []string, kubectl [][]string) {
	t.Helper()
	blocks := codeBlocks(section(t, "README.md", "## Install on a real hub"))
	for _, b := range blocks {
		for _, c := range commands(b) {
			switch {
			case c[0] == "helm" && len(c) > 1 && c[1] == "install":
				helm = c
			case c[0] == "kubectl" && helm != nil && len(kubectl) < 2:
				kubectl = append(kubectl, c)
			}
		}
	}
	if helm == nil || len(kubectl) != 2 || kubectl[0][1] != "apply" || !strings.HasSuffix(strings.Join(kubectl[1], " "), "get gitopsclusters") {
		t.Fatalf("the README's steps 2 and 3 no longer read as expected: helm %v, kubectl %v", helm, kubectl)
	}
	return helm, kubectl
}

// TestReadmeInstallReachesTheChartsPrincipal follows the README's "Install on a real hub"
// steps 2 and 3 as written: Helm installs the chart with the step's values (the principal in
// argocd beside the hub's Argo CD), kubectl applies step 3's files, and the manager the chart
// installed, running with the chart's arguments and RBAC, makes the GitOpsCluster of step 3
// Ready on the principal the chart installed: the endpoint is that principal's Service, and the
// Secrets that principal's arguments name are kept in its namespace, with the agent's cluster
// secret where the hub's Argo CD reads it. The chart's own defaults.create objects are the
// same as step 3's.
func TestReadmeInstallReachesTheChartsPrincipal(t *testing.T) {
	helmCmd, kubectl := readmeSteps(t)
	h := parseHelmInstall(t, helmCmd)
	getNS := ""
	for i, w := range kubectl[1] {
		if w == "-n" && i+1 < len(kubectl[1]) {
			getNS = kubectl[1][i+1]
		}
	}

	// What the hub has before step 2 (the principal uses the hub's Argo CD namespace).
	env, kubeconfig := hubBeforeInstall(t)
	ctx := context.Background()
	c := env.Client

	// Step 2.
	h.run(t, kubeconfig)
	principal := &appsv1.Deployment{}
	principalNS := mustPrincipalNamespace(t, c, principal)
	loadBalance(t, c, principalNS, "argocd-agent-principal", "203.0.113.7")
	runChartManager(t, env, h.namespace, h.release)

	// Step 3: kubectl apply, then the Placement decides (as OCM's placement controller would).
	objs := applyFiles(t, c, kubectl[0])
	var goc *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Placement":
			if err := fakehub.SetDecisions(ctx, c, o.GetNamespace(), o.GetName(), []string{"cluster1"}); err != nil {
				t.Fatal(err)
			}
		case "GitOpsCluster":
			goc = o
		}
	}
	if goc == nil {
		t.Fatal("step 3 applies no GitOpsCluster")
	}
	if goc.GetNamespace() != getNS {
		t.Errorf("step 3 watches GitOpsClusters in %q, but applies one in %q", getNS, goc.GetNamespace())
	}

	var got v1alpha1.GitOpsCluster
	poll.Until(t, "the README's GitOpsCluster Ready", 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(goc), &got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("conditions: %+v", got.Status.Conditions)
		}
		return nil
	})
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: principalNS, Name: "argocd-agent-principal"}, svc); err != nil {
		t.Fatal(err)
	}
	if p := got.Status.Principal; p == nil || p.Address != "203.0.113.7" || p.Port != svc.Spec.Ports[0].Port {
		t.Errorf("the GitOpsCluster's principal %+v, not the chart's principal Service %s/%s", p, principalNS, svc.Name)
	}
	// The Secrets the chart's principal reads, by the names its arguments give, in its namespace.
	args := principal.Spec.Template.Spec.Containers[0].Args
	secret := func(name string) *corev1.Secret {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: principalNS, Name: name}, s); err != nil {
			t.Errorf("the principal's Secret %s/%s: %v", principalNS, name, err)
		}
		return s
	}
	ca := secret(argValue(args, "tls-ca-secret-name"))
	for _, flag := range []string{"tls-secret-name", "resource-proxy-secret-name"} {
		verifyChain(t, secret(argValue(args, flag)), ca)
	}
	secret(argValue(args, "jwt-secret-name"))
	secret("cluster-cluster1")
	if err := c.Get(ctx, client.ObjectKey{Namespace: h.namespace, Name: argValue(args, "tls-ca-secret-name")}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a CA was also kept in the release namespace %s: %v", h.namespace, err)
	}

	// The chart's own first objects (defaults.create) are step 3's.
	vals := map[string]any{}
	for k, v := range h.values {
		vals[k] = v
	}
	vals["defaults"] = map[string]any{"create": true}
	manifest, _, err := chartrender.Render(chartDir(), h.namespace, h.release, vals)
	if err != nil {
		t.Fatal(err)
	}
	rendered := decode(t, manifest)
	for _, o := range objs {
		var match *unstructured.Unstructured
		for _, r := range rendered {
			if r.GetKind() == o.GetKind() && r.GetNamespace() == o.GetNamespace() && r.GetName() == o.GetName() {
				match = r
			}
		}
		if match == nil {
			t.Errorf("defaults.create renders no %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
			continue
		}
		if !reflect.DeepEqual(match.Object["spec"], o.Object["spec"]) {
			t.Errorf("%s %s/%s: defaults.create's spec %v, step 3's %v", o.GetKind(), o.GetNamespace(), o.GetName(), match.Object["spec"], o.Object["spec"])
		}
	}
}

// mustPrincipalNamespace finds the principal Deployment the chart installed.
func mustPrincipalNamespace(t *testing.T, c client.Client, into *appsv1.Deployment) string {
	t.Helper()
	list := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), list, client.MatchingLabels{"app.kubernetes.io/name": "argocd-agent-principal"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("the chart installed %d principals", len(list.Items))
	}
	*into = list.Items[0]
	return into.Namespace
}

// verifyChain checks that a kubernetes.io/tls Secret's certificate was issued by ca's.
func verifyChain(t *testing.T, leaf, ca *corev1.Secret) {
	t.Helper()
	parse := func(s *corev1.Secret) *x509.Certificate {
		b, _ := pem.Decode(s.Data["tls.crt"])
		if b == nil {
			t.Errorf("Secret %s holds no certificate", s.Name)
			return nil
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Error(err)
		}
		return cert
	}
	l, r := parse(leaf), parse(ca)
	if l == nil || r == nil {
		return
	}
	if err := l.CheckSignatureFrom(r); err != nil {
		t.Errorf("Secret %s is not signed by the CA in %s: %v", leaf.Name, ca.Name, err)
	}
}

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon") }

func decode(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}
