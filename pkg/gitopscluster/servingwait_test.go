package gitopscluster_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// ocmTemplateHash computes the spec hash OCM's addon manager records for an AddOnTemplate, the
// way it does: from the stored object read as unstructured, every top-level field but
// apiVersion, kind, metadata and status, as JSON, SHA-256 in hex.
func ocmTemplateHash(t *testing.T, name string) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: addonv1alpha1.GroupName, Version: "v1alpha1", Kind: "AddOnTemplate"})
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{}
	for k, v := range u.Object {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
		default:
			fields[k] = v
		}
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(raw))
}

// setAgentTemplate writes a ManagedClusterAddOn status as OCM's addon manager does once the
// agent's work is applied: the template it last applied, with its spec hash, and availability.
func setAgentTemplate(t *testing.T, cluster, template, specHash string, available bool) {
	t.Helper()
	mca := managedClusterAddOn(t, cluster)
	spec := &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Name: template}, SpecHash: specHash}
	mca.Status.ConfigReferences = []addonv1alpha1.ConfigReference{{
		ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: addon.ResourceAddOnTemplates},
		ConfigReferent:      spec.ConfigReferent,
		DesiredConfig:       spec,
		LastAppliedConfig:   spec.DeepCopy(),
	}}
	s := metav1.ConditionFalse
	if available {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable, Status: s, Reason: "Test", Message: "set by the test"})
	if err := k8s.Status().Update(context.Background(), mca); err != nil {
		t.Fatal(err)
	}
}

// Going back from cert-manager to the self-managed CA: the principal keeps the serving
// certificate cert-manager's issuer signed until every available agent has applied the
// template whose bundle trusts the new CA; then it gets one from the new CA. An agent whose
// addon is not Available does not hold the switch.
func TestServingCertificateWaitsForTheTrustRollout(t *testing.T) {
	ctx := context.Background()
	ns := "serving-wait"
	createNamespace(t, ns)
	clusters := []string{"sw-1", "sw-2", "sw-3"}
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)

	// What cert-manager left: its CA copied into the CA secret, and a serving certificate from
	// the issuer's root with that root as ca.crt.
	now := clock.Now()
	root, err := pki.NewCA("corp-root", 5*365*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	cmCA, err := pki.NewCA("argocd-agent-ca", 365*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := root.IssueServerCert("argocd-agent-principal", []string{"principal.example.com"}, nil, 90*24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gitopscluster.CASecretName, Labels: labels,
			Annotations: map[string]string{certmanager.AnnotationPKISource: certmanager.PKISourceCertManager}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": cmCA.CertPEM, "tls.key": cmCA.KeyPEM, "ca.crt": cmCA.CertPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gitopscluster.PrincipalTLSSecretName, Labels: labels},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": root.CertPEM}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}}
	template := names.TemplateName(g)
	for _, c := range clusters {
		setAgentTemplate(t, c, template, "before", true)
	}

	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForTrustRollout)
	newCA := leafOf(t, getSecret(t, ns, gitopscluster.CASecretName))
	if newCA.Equal(cmCA.Cert) {
		t.Fatal("the CA secret still holds cert-manager's CA")
	}
	// The template carries the new CA and the root the served certificate needs.
	var hash string
	eventually(t, "the template carries both anchors", func() error {
		tmpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: template}, tmpl); err != nil {
			return err
		}
		certs, err := pki.ParseCertificates(addon.TemplateCABundle(tmpl))
		if err != nil {
			return err
		}
		var haveNew, haveRoot bool
		for _, c := range certs {
			haveNew = haveNew || c.Equal(newCA)
			haveRoot = haveRoot || c.Equal(root.Cert)
		}
		if !haveNew || !haveRoot {
			return fmt.Errorf("new CA %v, issuer root %v", haveNew, haveRoot)
		}
		hash = ocmTemplateHash(t, template)
		return nil
	})

	unchanged := func(when string) {
		t.Helper()
		if s := getSecret(t, ns, gitopscluster.PrincipalTLSSecretName); string(s.Data["tls.crt"]) != string(serving.CertPEM) {
			t.Fatalf("%s: the principal's serving certificate changed", when)
		}
	}
	waitMessage := func(want string) {
		t.Helper()
		eventually(t, "condition says "+want, func() error {
			c := meta.FindStatusCondition(getGOC(t, ns, "fleet").Status.Conditions, v1alpha1.ConditionCertificatesReady)
			if c == nil || c.Reason != v1alpha1.ReasonWaitingForTrustRollout || !strings.Contains(c.Message, want) {
				return fmt.Errorf("%+v", c)
			}
			return nil
		})
	}
	waitMessage("0 of 3 available agent(s)")
	unchanged("no agent has the new bundle")

	// An agent that is not available does not count.
	setAgentTemplate(t, "sw-3", template, "before", false)
	waitMessage("0 of 2 available agent(s)")
	setAgentTemplate(t, "sw-1", template, hash, true)
	waitMessage("1 of 2 available agent(s)")
	unchanged("one agent still has the old bundle")

	setAgentTemplate(t, "sw-2", template, hash, true)
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	eventually(t, "the principal serves a certificate of the new CA", func() error {
		leaf := leafOf(t, getSecret(t, ns, gitopscluster.PrincipalTLSSecretName))
		return pki.VerifyChain(leaf, []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now())
	})
}
