package install

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

const gitopsClusterCRD = "gitopsclusters.apps.open-cluster-management.io"

// pullIntegrationHub creates what argocd-pull-integration's argocd-agent-addon chart (default
// values) and its controller leave on a hub with one cluster, as read from that project's
// chart and controller: the controller and its RBAC, the ClusterManagementAddOn and
// AddOnTemplate named argocd-agent-addon, its GitOpsCluster CRD and GitOpsCluster with the
// Placement and binding, the CA and serving certificates in argocd, the cluster's cluster
// secret, and the operator-run principal's Service and Deployment. It returns the objects Helm
// deletes on uninstall.
func pullIntegrationHub(t *testing.T, c client.Client, ca *pki.KeyPair) []client.Object {
	t.Helper()
	ctx := context.Background()
	helmLabels := map[string]string{"app.kubernetes.io/managed-by": "Helm"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": gitopsClusterCRD},
		"spec": map[string]any{
			"group": "apps.open-cluster-management.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "gitopsclusters", "singular": "gitopscluster", "kind": "GitOpsCluster", "listKind": "GitOpsClusterList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	mustCreate(t, c, crd)
	poll.Until(t, "the other project's GitOpsCluster API served", time.Minute, func() error {
		return c.Create(ctx, otherGitOpsCluster())
	})
	serving, err := ca.IssueServerCert("argocd-agent-principal", []string{"argocd-agent-principal.argocd.svc"}, nil, 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tlsSecret := func(name string, kp *pki.KeyPair) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM}}
	}
	for _, o := range []client.Object{
		tlsSecret("argocd-agent-ca", ca),
		tlsSecret("argocd-agent-principal-tls", serving),
		tlsSecret("argocd-agent-resource-proxy-tls", serving),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "cluster-cluster1", Labels: map[string]string{
			"argocd.argoproj.io/secret-type": "cluster", "apps.open-cluster-management.io/cluster-name": "cluster1",
			"argocd-agent.argoproj-labs.io/agent-name": "cluster1", "placement-name": "placement"}},
			Data: map[string][]byte{"name": []byte("cluster1"), "server": []byte("https://cluster1-control-plane"), "config": []byte(`{"tlsClientConfig":{"insecure":false}}`)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "argocd-agent-principal"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app.kubernetes.io/name": "argocd-agent-principal"},
				Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
		deployment("argocd", "argocd-agent-principal", nil),
	} {
		mustCreate(t, c, o)
	}
	loadBalance(t, c, "argocd", "argocd-agent-principal", "203.0.113.9")

	// The release's own objects: what helm uninstall deletes.
	release := []client.Object{
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "global", Labels: helmLabels},
			Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "global"}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "placement", Labels: helmLabels}},
		&addonv1alpha1.ClusterManagementAddOn{ObjectMeta: metav1.ObjectMeta{Name: "argocd-agent-addon", Labels: helmLabels},
			Spec: addonv1alpha1.ClusterManagementAddOnSpec{AddOnMeta: addonv1alpha1.AddOnMeta{DisplayName: "Argo CD Agent Addon"},
				InstallStrategy: addonv1alpha1.InstallStrategy{Type: addonv1alpha1.AddonInstallStrategyManual}}},
		&addonv1alpha1.AddOnTemplate{ObjectMeta: metav1.ObjectMeta{Name: "argocd-agent-addon", Labels: helmLabels},
			Spec: addonv1alpha1.AddOnTemplateSpec{AddonName: "argocd-agent-addon",
				Registration: []addonv1alpha1.RegistrationSpec{{Type: addonv1alpha1.RegistrationTypeCustomSigner,
					CustomSigner: &addonv1alpha1.CustomSignerRegistrationConfig{SignerName: "open-cluster-management.io/argocd-agent-addon",
						SigningCA: addonv1alpha1.SigningCARef{Name: "argocd-agent-ca", Namespace: "argocd"}}}}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "argocd-pull-integration-controller-manager", Labels: helmLabels}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-integration-manager-role", Labels: helmLabels},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"addon.open-cluster-management.io"}, Resources: []string{"clustermanagementaddons", "addontemplates"}, Verbs: []string{"*"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "argocd-pull-integration-manager-rolebinding", Labels: helmLabels},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "argocd-pull-integration-manager-role"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "argocd", Name: "argocd-pull-integration-controller-manager"}}},
		deployment("argocd", "argocd-pull-integration-controller", helmLabels),
	}
	for _, o := range release {
		mustCreate(t, c, o)
	}
	return append(release, otherGitOpsCluster())
}

func otherGitOpsCluster() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.open-cluster-management.io/v1alpha1", "kind": "GitOpsCluster",
		"metadata": map[string]any{"namespace": "argocd", "name": "gitops-cluster"},
		"spec": map[string]any{
			"placementRef":     map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement", "name": "placement"},
			"argoCDAgentAddon": map[string]any{"mode": "managed"},
		},
	}}
}

func deployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "quay.io/argoprojlabs/argocd-agent:v0.10.0"}}}}}}
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s/%s: %v", o, o.GetNamespace(), o.GetName(), err)
	}
}

// TestSwitchFromPullIntegrationChart follows docs/install.md's switch-over page, command by
// command, on a hub that argocd-pull-integration's argocd-agent-addon chart set up: the old
// addon is asked to uninstall, the release goes (its objects deleted, as helm uninstall does),
// the other GitOpsCluster CRD and the old serving certificates go, the chart installs as the
// page says and the README's GitOpsCluster becomes Ready on the kept principal. The CA is
// kept byte for byte, the cluster secret is taken over with a certificate of that CA, the
// serving certificates are the manager's and chain to it, and the addon objects of the shared
// name are this manager's.
func TestSwitchFromPullIntegrationChart(t *testing.T) {
	env, kubeconfig := hubBeforeInstall(t)
	ctx := context.Background()
	c := env.Client
	ca, err := pki.NewCA("argocd-agent-ca", 24*time.Hour*365, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	release := pullIntegrationHub(t, c, ca)
	caBefore := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "argocd", Name: "argocd-agent-ca"}, caBefore); err != nil {
		t.Fatal(err)
	}

	var installed *helmInstallCmd
	var applied []*unstructured.Unstructured
	seen := map[string]bool{}
	for _, block := range codeBlocks(section(t, "docs/install.md", "## Switching from argocd-pull-integration's argocd-agent-addon chart")) {
		for _, w := range commands(block) {
			line := strings.Join(w, " ")
			switch {
			case w[0] == "helm" && w[1] == "uninstall":
				seen["helm uninstall"] = true
				for _, o := range release {
					if err := c.Delete(ctx, o); err != nil {
						t.Fatalf("%s: deleting %T %s: %v", line, o, o.GetName(), err)
					}
				}
			case w[0] == "helm" && w[1] == "install":
				seen["helm install"] = true
				h := parseHelmInstall(t, w)
				h.run(t, kubeconfig)
				installed = &h
			case w[0] != "kubectl":
				t.Fatalf("the page runs %q, which the test does not know", line)
			case contains(w, "patch"):
				seen["patch"] = true
				patch := strings.Trim(w[len(w)-1], "'")
				u := otherGitOpsCluster()
				if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				if v, _, _ := unstructured.NestedBool(u.Object, "spec", "argoCDAgentAddon", "uninstall"); !v {
					t.Errorf("%s: the old GitOpsCluster does not ask its addon to uninstall: %v", line, u.Object["spec"])
				}
			case contains(w, "annotate"):
				// The hub's ArgoCD object: argocd-operator does not run here.
				seen["annotate"] = true
			case contains(w, "delete") && contains(w, "crd"):
				seen["delete crd"] = true
				if err := c.Delete(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
					"metadata": map[string]any{"name": w[len(w)-1]}}}); err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				poll.Until(t, "the other CRD gone", time.Minute, func() error {
					err := c.Get(ctx, client.ObjectKey{Name: gitopsClusterCRD}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}})
					if apierrors.IsNotFound(err) {
						return nil
					}
					return fmt.Errorf("still there: %v", err)
				})
			case contains(w, "delete") && contains(w, "secret"):
				seen["delete secret"] = true
				for _, name := range w[slices.Index(w, "secret")+1:] {
					if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name}}); err != nil {
						t.Fatalf("%s: %v", line, err)
					}
				}
			case contains(w, "apply"):
				seen["apply"] = true
				if installed == nil {
					t.Fatal("the page applies objects before the chart is installed")
				}
				runChartManager(t, env, installed.namespace, installed.release)
				applied = applyFiles(t, c, w)
			case contains(w, "get"):
			default:
				t.Fatalf("the page runs %q, which the test does not know", line)
			}
		}
	}
	for _, step := range []string{"patch", "annotate", "helm uninstall", "delete crd", "delete secret", "helm install", "apply"} {
		if !seen[step] {
			t.Fatalf("the page no longer has its %q step", step)
		}
	}
	var goc *unstructured.Unstructured
	for _, o := range applied {
		if o.GetKind() == "Placement" {
			if err := fakehub.SetDecisions(ctx, c, o.GetNamespace(), o.GetName(), []string{"cluster1"}); err != nil {
				t.Fatal(err)
			}
		}
		if o.GetKind() == "GitOpsCluster" {
			goc = o
		}
	}
	var got v1alpha1.GitOpsCluster
	poll.Until(t, "the GitOpsCluster Ready on the kept principal", 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(goc), &got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("conditions: %+v", got.Status.Conditions)
		}
		return nil
	})
	if p := got.Status.Principal; p == nil || p.Address != "203.0.113.9" {
		t.Errorf("principal %+v, not the kept principal's Service", p)
	}

	caAfter := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(caBefore), caAfter); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caBefore.Data[corev1.TLSCertKey], caAfter.Data[corev1.TLSCertKey]) || !bytes.Equal(caBefore.Data[corev1.TLSPrivateKeyKey], caAfter.Data[corev1.TLSPrivateKeyKey]) {
		t.Error("the old CA was not kept as it was")
	}
	for _, name := range []string{"argocd-agent-principal-tls", "argocd-agent-resource-proxy-tls"} {
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "argocd", Name: name}, s); err != nil {
			t.Errorf("serving certificate %s: %v", name, err)
			continue
		}
		if !names.ManagedByUs(s) {
			t.Errorf("serving certificate %s is not the manager's", name)
		}
		chainsTo(t, name, s.Data[corev1.TLSCertKey], ca.Cert)
	}
	poll.Until(t, "the cluster secret taken over", time.Minute, func() error {
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "argocd", Name: "cluster-cluster1"}, s); err != nil {
			return err
		}
		if !names.ManagedByUs(s) {
			return fmt.Errorf("labels %v", s.Labels)
		}
		var cfg struct {
			TLSClientConfig struct {
				CertData []byte `json:"certData"`
			} `json:"tlsClientConfig"`
		}
		if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
			return err
		}
		chainsTo(t, "cluster-cluster1", cfg.TLSClientConfig.CertData, ca.Cert)
		return nil
	})
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := c.Get(ctx, types.NamespacedName{Name: "argocd-agent-addon"}, cma); err != nil {
		t.Errorf("the ClusterManagementAddOn of the shared name: %v", err)
	} else if !names.ManagedByUs(cma) {
		t.Errorf("the ClusterManagementAddOn is not this manager's: labels %v", cma.Labels)
	}
}

// chainsTo checks that the first certificate of certPEM was issued by ca.
func chainsTo(t *testing.T, what string, certPEM []byte, ca *x509.Certificate) {
	t.Helper()
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil || len(certs) == 0 {
		t.Errorf("%s: no certificate: %v", what, err)
		return
	}
	if err := certs[0].CheckSignatureFrom(ca); err != nil {
		t.Errorf("%s is not issued by the kept CA: %v", what, err)
	}
}

func contains(words []string, w string) bool { return slices.Contains(words, w) }
