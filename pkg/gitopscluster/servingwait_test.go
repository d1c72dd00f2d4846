package gitopscluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
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
// addon is not Available does not hold the switch, nor does a template no available agent
// runs (that of a GitOpsCluster stopped by a conflict of its own). The wait is no fault:
// CertificatesReady stays True and does not hold Ready.
func TestServingCertificateWaitsForTheTrustRollout(t *testing.T) {
	t.Parallel()
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
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CASecretName, Labels: labels,
			Annotations: map[string]string{certmanager.AnnotationPKISource: certmanager.PKISourceCertManager}},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": cmCA.CertPEM, "tls.key": cmCA.KeyPEM, "ca.crt": cmCA.CertPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.PrincipalTLSSecretName, Labels: labels},
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
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonWaitingForTrustRollout)
	newCA := leafOf(t, getSecret(t, ns, names.CASecretName))
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
		if s := getSecret(t, ns, names.PrincipalTLSSecretName); string(s.Data["tls.crt"]) != string(serving.CertPEM) {
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
	if c := meta.FindStatusCondition(getGOC(t, ns, "fleet").Status.Conditions, v1alpha1.ConditionReady); c != nil && strings.Contains(c.Message, v1alpha1.ConditionCertificatesReady) {
		t.Errorf("the trust rollout holds Ready: %s", c.Message)
	}

	// A younger GitOpsCluster of the same principal that asks for another PKI stops at
	// PKIConflict and never rewrites the template it had; no agent runs that template. (Its
	// name also sorts after "fleet", which decides the age of two created in one second.)
	leftover := &addonv1alpha1.AddOnTemplate{ObjectMeta: metav1.ObjectMeta{Name: names.TemplateName(&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "younger"}})},
		Spec: addonv1alpha1.AddOnTemplateSpec{AddonName: "argocd-agent-addon"}}
	if err := k8s.Create(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "younger", "p", withAddress("principal.example.com"), withIssuer("corp-ca"))
	conditionIs(t, ns, "younger", v1alpha1.ConditionCertificatesReady, metav1.ConditionFalse, v1alpha1.ReasonPKIConflict)

	// An agent that is not available does not count.
	setAgentTemplate(t, "sw-3", template, "before", false)
	waitMessage("0 of 2 available agent(s)")
	setAgentTemplate(t, "sw-1", template, hash, true)
	waitMessage("1 of 2 available agent(s)")
	unchanged("one agent still has the old bundle")

	// A GitOpsCluster of the principal that owns none of the clusters lists them all as revoked:
	// only AgentRevocations, which the manager makes for a cluster's owner, count.
	setRevoked := func(g string, clusters ...string) {
		t.Helper()
		cur := getGOC(t, ns, g)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.RevokedClusters = clusters
		if err := k8s.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	setRevoked("younger", clusters...)
	fleetGOC := getGOC(t, ns, "fleet")
	touch := client.MergeFrom(fleetGOC.DeepCopy())
	fleetGOC.Annotations = map[string]string{"test/touch": "after-younger-revoked"}
	if err := k8s.Patch(ctx, fleetGOC, touch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	unchanged("a GitOpsCluster owning none of the clusters listed them as revoked")
	waitMessage("1 of 2 available agent(s)")
	setRevoked("younger")

	// A revoked agent cannot connect with either certificate: it holds nothing, whichever
	// principal namespace holds its AgentRevocation (a revocation holds on every principal).
	other := ns + "-other-principal"
	createNamespace(t, other)
	if err := k8s.Create(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "sw-2"}}); err != nil {
		t.Fatal(err)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	eventually(t, "the principal serves a certificate of the new CA", func() error {
		leaf := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		return pki.VerifyChain(leaf, []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now())
	})
}

// agedSelfManagedPKI puts in namespace ns what an earlier reconcile of this project left: a CA
// of its own past two thirds of its life (the next reconcile rotates it) and a principal
// serving certificate from that CA, valid servingValidity from now. Every cluster's agent is
// Available and last applied a template carrying only that CA.
func agedSelfManagedPKI(t *testing.T, ns string, clusters []string, servingValidity time.Duration) (oldCA, serving *pki.KeyPair, template string) {
	t.Helper()
	ctx := context.Background()
	createNamespace(t, ns)
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)
	now := clock.Now()
	oldCA, err := pki.NewCA("argocd-agent-ca", 5*365*24*time.Hour, now.Add(-4*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !pki.NeedsRenewal(oldCA.Cert, now) {
		t.Fatal("the aged CA does not need renewal: the test would not rotate it")
	}
	serving, err = oldCA.IssueServerCert("argocd-agent-principal", []string{"principal.example.com"}, nil, servingValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CASecretName, Labels: labels},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": oldCA.CertPEM, "tls.key": oldCA.KeyPEM, "ca.crt": oldCA.CertPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.PrincipalTLSSecretName, Labels: labels},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": oldCA.CertPEM}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	template = names.TemplateName(&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"}})
	for _, c := range clusters {
		setAgentTemplate(t, c, template, "old-ca-only", true)
	}
	return oldCA, serving, template
}

// rotatedTemplateHash waits for the CA secret to hold a CA other than old, and for the
// template to carry it next to old; it returns the new CA and the template's spec hash then.
func rotatedTemplateHash(t *testing.T, ns, template string, old *x509.Certificate) (*x509.Certificate, string) {
	t.Helper()
	var newCA *x509.Certificate
	var hash string
	eventually(t, "the CA is rotated and the template carries the new CA and the old one", func() error {
		newCA = leafOf(t, getSecret(t, ns, names.CASecretName))
		if newCA.Equal(old) {
			return fmt.Errorf("the CA is not rotated yet")
		}
		tmpl := &addonv1alpha1.AddOnTemplate{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: template}, tmpl); err != nil {
			return err
		}
		certs, err := pki.ParseCertificates(addon.TemplateCABundle(tmpl))
		if err != nil {
			return err
		}
		var haveNew, haveOld bool
		for _, c := range certs {
			haveNew = haveNew || c.Equal(newCA)
			haveOld = haveOld || c.Equal(old)
		}
		if !haveNew || !haveOld {
			return fmt.Errorf("template bundle: new CA %v, old CA %v", haveNew, haveOld)
		}
		hash = ocmTemplateHash(t, template)
		return nil
	})
	return newCA, hash
}

// The self-managed CA is rotated (two thirds of its life passed) while an Available agent
// still runs a template that trusts only the old CA: the principal keeps its serving
// certificate from the old CA until that agent has applied the template carrying the new one.
func TestServingCertificateWaitsThroughCARotation(t *testing.T) {
	t.Parallel()
	ns := "serving-wait-rotation"
	oldCA, serving, template := agedSelfManagedPKI(t, ns, []string{"swr-1"}, 365*24*time.Hour)

	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonWaitingForTrustRollout)
	newCA, hash := rotatedTemplateHash(t, ns, template, oldCA.Cert)
	eventually(t, "the condition counts the agent as pending", func() error {
		c := meta.FindStatusCondition(getGOC(t, ns, "fleet").Status.Conditions, v1alpha1.ConditionCertificatesReady)
		if c == nil || c.Reason != v1alpha1.ReasonWaitingForTrustRollout || !strings.Contains(c.Message, "0 of 1 available agent(s)") {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if s := getSecret(t, ns, names.PrincipalTLSSecretName); string(s.Data["tls.crt"]) != string(serving.CertPEM) {
		t.Fatal("the principal's serving certificate changed before the agent trusts the new CA")
	}

	setAgentTemplate(t, "swr-1", template, hash, true)
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	eventually(t, "the principal serves a certificate of the new CA", func() error {
		leaf := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		return pki.VerifyChain(leaf, []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now())
	})
}

// The principal does not wait past its serving certificate's expiry: an expired certificate
// verifies for no agent, so it is replaced although an agent is still pending, and a Warning
// event says so. This test moves the shared fake clock two hours forward.
func TestExpiredServingCertificateIsReplacedDuringTrustRollout(t *testing.T) {
	ctx := context.Background()
	ns := "serving-wait-expiry"
	_, serving, template := agedSelfManagedPKI(t, ns, []string{"swe-1"}, time.Hour)

	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonWaitingForTrustRollout)
	if s := getSecret(t, ns, names.PrincipalTLSSecretName); string(s.Data["tls.crt"]) != string(serving.CertPEM) {
		t.Fatal("the principal's serving certificate changed before it expired or the agent trusts the new CA")
	}

	clock.Advance(2 * time.Hour)
	poke(t, ns, "fleet")
	// The condition's message names the expiry only in the reconcile that replaced the
	// certificate (the next one rewrites it); the Warning event below stays.
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	newCA := leafOf(t, getSecret(t, ns, names.CASecretName))
	if err := pki.VerifyChain(leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName)), []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now()); err != nil {
		t.Fatalf("the principal's new serving certificate: %v", err)
	}
	// The agent is still pending: it never applied the template with the new CA.
	if mca := managedClusterAddOn(t, "swe-1"); mca.Status.ConfigReferences[0].LastAppliedConfig.SpecHash == ocmTemplateHash(t, template) {
		t.Fatal("the agent has the new template: the test does not show the expiry path")
	}
	eventually(t, "a Warning event on the GitOpsCluster says the certificate was replaced anyway", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "GitOpsCluster" && e.Regarding.Name == "fleet" && e.Type == corev1.EventTypeWarning &&
				e.Reason == v1alpha1.ReasonWaitingForTrustRollout && strings.Contains(e.Note, "replaced anyway") {
				return nil
			}
		}
		return fmt.Errorf("none among %d event(s)", len(list.Items))
	})
}

// TestEmergencyCARotationDistrustsThePreviousCA: annotating the CA secret with a new
// rotate-ca-now token mints a new CA and drops every previous one from the trust bundle at
// once; the principal's serving certificate moves to the new CA without waiting for agents
// that still run the old template. The same token never rotates twice.
func TestEmergencyCARotationDistrustsThePreviousCA(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "emergency-ca"
	createNamespace(t, ns)
	clusters := []string{"ec-1", "ec-2"}
	createManagedClusters(t, clusters...)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, clusters...)
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, v1alpha1.ReasonCertificatesIssued)
	template := names.TemplateName(getGOC(t, ns, "fleet"))
	for _, c := range clusters {
		// Available agents that applied a template trusting only the current CA.
		setAgentTemplate(t, c, template, "old-ca-only", true)
	}
	oldCA := leafOf(t, waitSecret(t, ns, names.CASecretName))

	rotate := func(token string) {
		t.Helper()
		s := getSecret(t, ns, names.CASecretName)
		patch := client.MergeFrom(s.DeepCopy())
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, v1alpha1.AnnotationRotateCANow, token)
		if err := k8s.Patch(ctx, s, patch); err != nil {
			t.Fatal(err)
		}
	}
	rotate("INC-1")
	var newCA *x509.Certificate
	eventually(t, "a new CA, alone in the bundle, and the principal on it", func() error {
		s := getSecret(t, ns, names.CASecretName)
		newCA = leafOf(t, s)
		if newCA.Equal(oldCA) {
			return fmt.Errorf("the CA is not rotated yet")
		}
		bundle, err := pki.ParseCertificates(s.Data["ca.crt"])
		if err != nil {
			return err
		}
		if len(bundle) != 1 || !bundle[0].Equal(newCA) {
			return fmt.Errorf("the bundle holds %d certificate(s); want the new CA only", len(bundle))
		}
		leaf := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		return pki.VerifyChain(leaf, []*x509.Certificate{newCA}, x509.ExtKeyUsageServerAuth, clock.Now())
	})
	if got := getSecret(t, ns, names.CASecretName).Annotations[v1alpha1.AnnotationCARotatedFor]; got != "INC-1" {
		t.Errorf("%s = %q", v1alpha1.AnnotationCARotatedFor, got)
	}

	// The same token again changes nothing.
	touch(t, ns, "fleet")
	consistently(t, "the CA stays", 3*time.Second, func() error {
		if !leafOf(t, getSecret(t, ns, names.CASecretName)).Equal(newCA) {
			return fmt.Errorf("the CA was rotated again for the same token")
		}
		return nil
	})
}

// TestJWTSigningKeyRotation: a new rotate-jwt-key-now token on the JWT secret makes a new key
// and restarts the principal to load it; the same token rotates once.
func TestJWTSigningKeyRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ns = "jwt-rotation"
	dep := principalWithGitOpsCluster(t, ns, withAddress("principal.example.com"))
	principalStamp(t, dep)
	old := waitSecret(t, ns, names.JWTSecretName).Data[names.JWTSecretKey]

	s := getSecret(t, ns, names.JWTSecretName)
	patch := client.MergeFrom(s.DeepCopy())
	metav1.SetMetaDataAnnotation(&s.ObjectMeta, v1alpha1.AnnotationRotateJWTKeyNow, "INC-7")
	if err := k8s.Patch(ctx, s, patch); err != nil {
		t.Fatal(err)
	}
	var key []byte
	eventually(t, "a new JWT key, and the principal restarted for it", func() error {
		key = getSecret(t, ns, names.JWTSecretName).Data[names.JWTSecretKey]
		if bytes.Equal(key, old) {
			return fmt.Errorf("the key is unchanged")
		}
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return err
		}
		if got := d.Spec.Template.Annotations[v1alpha1.AnnotationJWTKeyRotatedFor]; got != "INC-7" {
			return fmt.Errorf("principal pod template %s = %q", v1alpha1.AnnotationJWTKeyRotatedFor, got)
		}
		return nil
	})
	touch(t, ns, "fleet")
	consistently(t, "the key stays", 3*time.Second, func() error {
		if !bytes.Equal(getSecret(t, ns, names.JWTSecretName).Data[names.JWTSecretKey], key) {
			return fmt.Errorf("the key was rotated again for the same token")
		}
		return nil
	})
}
