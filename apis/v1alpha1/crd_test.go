package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// readmeExample is the upstream README's GitOpsCluster, applied unchanged.
const readmeExample = testenv.ReadmeGitOpsCluster

func objectFromYAML(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("parsing YAML: %v", err)
	}
	return u
}

func TestGitOpsClusterCRD(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	c := env.Client

	for _, ns := range []string{"open-cluster-management", "validation"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("CRD is installed with short names, status subresource and columns", func(t *testing.T) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: "gitopsclusters.apps.open-cluster-management.io"}, crd); err != nil {
			t.Fatal(err)
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			t.Errorf("scope = %s, want Namespaced", crd.Spec.Scope)
		}
		if got := strings.Join(crd.Spec.Names.ShortNames, ","); got != "gitopscluster,goc" {
			t.Errorf("short names = %s", got)
		}
		v := crd.Spec.Versions[0]
		if v.Name != "v1alpha1" || v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("version %s lacks the status subresource", v.Name)
		}
		var cols []string
		for _, col := range v.AdditionalPrinterColumns {
			cols = append(cols, col.Name)
		}
		if got := strings.Join(cols, ","); got != "Mode,Placement,Selected,Available,Ready,Age" {
			t.Errorf("printer columns = %s", got)
		}
	})

	t.Run("upstream README example applies unchanged and gets defaults", func(t *testing.T) {
		u := objectFromYAML(t, readmeExample)
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("README example rejected: %v", err)
		}
		got := &v1alpha1.GitOpsCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "open-cluster-management", Name: "my-gitops-cluster"}, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.PlacementRef.Name != "argocd-placement" || got.Spec.PlacementRef.Kind != "Placement" {
			t.Errorf("placementRef = %+v", got.Spec.PlacementRef)
		}
		if got.Spec.ArgoCDAgentAddon.Mode != v1alpha1.AgentModeManaged {
			t.Errorf("mode = %q", got.Spec.ArgoCDAgentAddon.Mode)
		}
	})

	t.Run("issuerRef kind and group default to a cert-manager.io Issuer", func(t *testing.T) {
		u := objectFromYAML(t, `
apiVersion: apps.open-cluster-management.io/v1alpha1
kind: GitOpsCluster
metadata: {name: issuer-defaults, namespace: validation}
spec:
  placementRef: {name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {name: corp-ca}}}
`)
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.GitOpsCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "validation", Name: "issuer-defaults"}, got); err != nil {
			t.Fatal(err)
		}
		if ref := got.Spec.ArgoCDAgentAddon.CertManager.IssuerRef; ref.Kind != "Issuer" || ref.Group != "cert-manager.io" {
			t.Errorf("issuerRef defaults not applied: %+v", ref)
		}
	})

	t.Run("mode and kind default when omitted", func(t *testing.T) {
		u := objectFromYAML(t, `
apiVersion: apps.open-cluster-management.io/v1alpha1
kind: GitOpsCluster
metadata: {name: defaults, namespace: validation}
spec:
  placementRef: {name: p}
  argoCDAgentAddon: {}
`)
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.GitOpsCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "validation", Name: "defaults"}, got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ArgoCDAgentAddon.Mode != v1alpha1.AgentModeManaged || got.Spec.PlacementRef.Kind != v1alpha1.PlacementKind ||
			got.Spec.ArgoCDAgentAddon.ApplicationMapping != v1alpha1.ApplicationMappingNamespace {
			t.Errorf("defaults not applied: %+v", got.Spec)
		}
	})

	valid := map[string]string{
		"every field, port as a number": `
spec:
  placementRef: {apiVersion: cluster.open-cluster-management.io/v1beta1, kind: Placement, name: all-clusters}
  argoCDAgentAddon:
    mode: autonomous
    principalServerAddress: principal.example.com
    principalServerPort: 8443
    agentNamespace: argocd-agent`,
		"port quoted as a string, as upstream YAML writes it": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: managed, principalServerAddress: 192.0.2.10, principalServerPort: "443"}`,
		"revoked clusters and a 30-day certificate lifetime": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {clientCertificateValidity: 720h}
  revokedClusters: [cluster1, cluster-2]`,
		"IPv6 address": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerAddress: "2001:db8::1", principalServerPort: 65535}`,
		"a cert-manager ClusterIssuer": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}}`,
		"destination-based application mapping in managed mode": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: managed, applicationMapping: Destination}`,
		"destination-based application mapping, mode left to its default": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {applicationMapping: Destination}`,
		"namespace application mapping in autonomous mode": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: autonomous, applicationMapping: Namespace}`,
		"an operator-made Argo CD's redis, existing Argo CD replaced elsewhere, assigned user IDs": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon:
    argoCDComponents: Existing
    redis: {address: "example-argocd-redis:6379", passwordSecretName: example-argocd-redis-initial-password, passwordSecretKey: admin.password}
    existingArgoCD: Replace
    userIDs: Assigned`,
		"Argo CD configuration from the hub": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon:
    argoCDConfig:
      argocd-cm: {timeout.reconciliation: 90s}
      argocd-tls-certs-cm: {git.example.com: "-----BEGIN CERTIFICATE-----"}
      sshKnownHosts: "git.example.com ssh-ed25519 AAAA"`,
		"an external issuer of another group": `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {name: vault.corp, kind: GoogleCASIssuer, group: cas-issuer.jetstack.io}}}`,
	}
	for name, spec := range valid {
		t.Run("accepts "+name, func(t *testing.T) {
			u := objectFromYAML(t, "apiVersion: apps.open-cluster-management.io/v1alpha1\nkind: GitOpsCluster\nmetadata: {generateName: valid-, namespace: validation}\n"+spec)
			if err := c.Create(ctx, u); err != nil {
				t.Fatalf("rejected: %v", err)
			}
		})
	}

	invalid := []struct {
		name, spec string
		want       []string
	}{
		{"unknown mode", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: pull}`, []string{"spec.argoCDAgentAddon.mode", `Unsupported value: "pull"`, `"managed"`, `"autonomous"`}},
		{"destination-based application mapping in autonomous mode", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: autonomous, applicationMapping: Destination}`, []string{"spec.argoCDAgentAddon", "applicationMapping Destination needs mode managed"}},
		{"redis of an Argo CD the addon installs", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {redis: {address: "example-argocd-redis:6379"}}`, []string{"spec.argoCDAgentAddon", "redis configures the agent for an Argo CD the addon does not install"}},
		{"redis address without a port", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {argoCDComponents: Existing, redis: {address: "example-argocd-redis"}}`, []string{"spec.argoCDAgentAddon.redis.address", "address must be host:port"}},
		{"unknown existingArgoCD", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {existingArgoCD: Adopt}`, []string{"spec.argoCDAgentAddon.existingArgoCD", `Unsupported value: "Adopt"`, `"LeaveAlone"`, `"Replace"`}},
		{"unknown userIDs", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {userIDs: Random}`, []string{"spec.argoCDAgentAddon.userIDs", `Unsupported value: "Random"`, `"Fixed"`, `"Assigned"`}},
		{"Argo CD configuration with an existing Argo CD", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {argoCDComponents: Existing, argoCDConfig: {argocd-cm: {a: b}}}`, []string{"spec.argoCDAgentAddon", "argoCDConfig configures the Argo CD the addon installs"}},
		{"a cluster's Argo CD configuration with an existing Argo CD", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {argoCDComponents: Existing, clusterArgoCDConfig: [{clusterName: c1, argocd-cm: {a: b}}]}`, []string{"spec.argoCDAgentAddon", "clusterArgoCDConfig configures the Argo CD the addon installs"}},
		{"a cluster's Argo CD configuration for a name no cluster can have", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {clusterArgoCDConfig: [{clusterName: Cluster_1, argocd-cm: {a: b}}]}`, []string{"spec.argoCDAgentAddon.clusterArgoCDConfig[0].clusterName", "clusterName must be a ManagedCluster name"}},
		{"the same cluster twice", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {clusterArgoCDConfig: [{clusterName: c1, argocd-cm: {a: b}}, {clusterName: c1}]}`, []string{"spec.argoCDAgentAddon.clusterArgoCDConfig[1]", "Duplicate value"}},
		{"unknown application mapping", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {applicationMapping: destination}`, []string{"spec.argoCDAgentAddon.applicationMapping", `Unsupported value: "destination"`, `"Namespace"`, `"Destination"`}},
		{"port 0", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerPort: 0}`, []string{"spec.argoCDAgentAddon.principalServerPort", "principalServerPort must be a port number between 1 and 65535"}},
		{"port 70000", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerPort: 70000}`, []string{"principalServerPort must be a port number between 1 and 65535"}},
		{"port as a non-numeric string", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerPort: "https"}`, []string{"principalServerPort must be a port number between 1 and 65535"}},
		{"quoted port 70000", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerPort: "70000"}`, []string{"principalServerPort must be a port number between 1 and 65535"}},
		{"placementRef kind other than Placement", `
spec:
  placementRef: {kind: ManagedClusterSet, name: p}
  argoCDAgentAddon: {mode: managed}`, []string{"spec.placementRef.kind", `Unsupported value: "ManagedClusterSet"`, `"Placement"`}},
		{"missing placementRef", `
spec:
  argoCDAgentAddon: {mode: managed}`, []string{"spec.placementRef: Required value"}},
		{"missing placementRef name", `
spec:
  placementRef: {kind: Placement}
  argoCDAgentAddon: {mode: managed}`, []string{"spec.placementRef.name: Required value"}},
		{"client certificates valid longer than 30 days", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {clientCertificateValidity: 721h}`, []string{"clientCertificateValidity must be at most 720h (30 days)"}},
		{"a revoked cluster name that is not a DNS label", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: managed}
  revokedClusters: [Cluster_1]`, []string{"spec.revokedClusters[0]"}},
		{"the same revoked cluster twice", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {mode: managed}
  revokedClusters: [c1, c1]`, []string{"spec.revokedClusters[1]", "Duplicate value"}},
		{"a cert-manager.io issuer kind other than Issuer or ClusterIssuer", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {name: corp-ca, kind: Certificate}}}`, []string{"spec.argoCDAgentAddon.certManager.issuerRef", "kind must be Issuer or ClusterIssuer for group cert-manager.io"}},
		{"an issuerRef without a name", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {kind: ClusterIssuer}}}`, []string{"spec.argoCDAgentAddon.certManager.issuerRef.name: Required value"}},
		{"an issuer name that is not a DNS subdomain", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {certManager: {issuerRef: {name: Corp_CA}}}`, []string{"spec.argoCDAgentAddon.certManager.issuerRef.name"}},
		{"missing argoCDAgentAddon", `
spec:
  placementRef: {kind: Placement, name: p}`, []string{"spec.argoCDAgentAddon: Required value"}},
		{"address with a scheme", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerAddress: "https://principal.example.com"}`, []string{"spec.argoCDAgentAddon.principalServerAddress", "must be a bare host name or IP address"}},
		{"address with spaces", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerAddress: "principal example.com"}`, []string{"must be a bare host name or IP address"}},
		{"address with a port", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {principalServerAddress: "principal.example.com:443"}`, []string{"must be a bare host name or IP address"}},
		{"agentNamespace not a DNS label", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {agentNamespace: Argo_CD}`, []string{"spec.argoCDAgentAddon.agentNamespace", "agentNamespace must be a DNS label"}},
		{"agentNamespace longer than 63 characters", `
spec:
  placementRef: {kind: Placement, name: p}
  argoCDAgentAddon: {agentNamespace: ` + strings.Repeat("a", 64) + `}`, []string{"spec.argoCDAgentAddon.agentNamespace", "may not be more than 63"}},
	}
	for _, tc := range invalid {
		t.Run("rejects "+tc.name, func(t *testing.T) {
			u := objectFromYAML(t, "apiVersion: apps.open-cluster-management.io/v1alpha1\nkind: GitOpsCluster\nmetadata: {generateName: invalid-, namespace: validation}\n"+tc.spec)
			err := c.Create(ctx, u)
			if err == nil {
				t.Fatalf("accepted an invalid object")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err.Error(), w)
				}
			}
		})
	}

	t.Run("principalNamespace cannot change, be set or be removed", func(t *testing.T) {
		g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Name: "immutable", Namespace: "validation"},
			Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Name: "p"},
				ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalNamespace: "argocd"}}}
		if err := c.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"other", ""} {
			changed := g.DeepCopy()
			changed.Spec.ArgoCDAgentAddon.PrincipalNamespace = to
			err := c.Update(ctx, changed)
			if err == nil || !strings.Contains(err.Error(), "principalNamespace is immutable") {
				t.Errorf("changing principalNamespace to %q: %v", to, err)
			}
		}
		// Other fields still change.
		g.Spec.ArgoCDAgentAddon.AgentNamespace = "agents"
		if err := c.Update(ctx, g); err != nil {
			t.Errorf("an unrelated change was refused: %v", err)
		}
	})
}
