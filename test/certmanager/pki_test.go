package certmanager_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	pkgcm "github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	ns          = "argocd"
	cluster     = "cluster1"
	principalTL = "argocd-agent-principal-tls"
)

// TestCertManagerPKIThroughRealControllers runs cert-manager's own controllers (in process)
// and the manager as the binary builds it, and walks a principal from the self-managed CA to
// a cert-manager CA Issuer, through a renewal forced the way `cmctl renew` does it, and back:
// the signer signs agent CSRs with whichever CA is current, and every agent certificate issued
// along the way keeps verifying against the principal's CA bundle until its CA expires.
func TestCertManagerPKIThroughRealControllers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.ErrorLevel)))
	env := testenv.StartForTest(t, testenv.Options{WithCertManager: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := env.Client
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, n := range []string{ns, cluster, certmanager.ClusterResourceNamespace} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}

	waitCM, err := certmanager.Start(ctx, env.Config, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stopManager := startManager(t, env.Config)
	defer func() {
		stopManager()
		cancel()
		waitCM()
	}()

	// The corporate CA, made by cert-manager itself: a self-signed root behind a CA Issuer.
	mustCreate(t, admin,
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "selfsigned"},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corp-root"},
			Spec: cmapi.CertificateSpec{IsCA: true, CommonName: "corp-root", SecretName: "corp-root",
				Duration:   &metav1.Duration{Duration: 10 * 365 * 24 * time.Hour},
				PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
				IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: "Issuer", Group: "cert-manager.io"}}},
		&cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "corp-ca"},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "corp-root"}}}},
	)

	// The hub side: one cluster selected, a principal Deployment to restart, and the
	// GitOpsCluster, first on the self-managed CA.
	mustCreate(t, admin,
		&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement"}},
		principalDeployment(),
	)
	if err := fakehub.SetDecisionPage(ctx, admin, ns, "placement", 1, []string{cluster}); err != nil {
		t.Fatal(err)
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleet"},
		Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalServerAddress: "principal.example.com"}}}
	mustCreate(t, admin, goc)
	grantCSRCreate(t, admin)

	waitCertificatesReady(t, admin, "self-managed")
	selfCA := caSecret(t, admin)
	leafSelf := signAgentCSR(t, env.Config, cs)
	verifyClient(t, "agent certificate of the self-managed CA", leafSelf, selfCA.Data["ca.crt"])

	// An issuer that is missing, or not Ready, is a condition with cert-manager's reason.
	for _, n := range []string{"broken", "missing"} {
		mustCreate(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}},
			&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "placement"}},
			&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "fleet"},
				Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
					ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "principal.example.com",
						CertManager: &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: "corp-ca"}}}}})
	}
	mustCreate(t, admin, &cmapi.Issuer{ObjectMeta: metav1.ObjectMeta{Namespace: "broken", Name: "corp-ca"},
		Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "no-such-secret"}}}})
	waitCondition(t, admin, "broken", v1alpha1.ReasonIssuerNotReady, "no-such-secret")
	waitCondition(t, admin, "missing", v1alpha1.ReasonIssuerNotFound, "Issuer missing/corp-ca does not exist")

	// A ClusterIssuer works the same; its CA lives in cert-manager's cluster resource namespace.
	mustCreate(t, admin,
		&cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: "selfsigned"},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}}},
		&cmapi.Certificate{ObjectMeta: metav1.ObjectMeta{Namespace: certmanager.ClusterResourceNamespace, Name: "cluster-root"},
			Spec: cmapi.CertificateSpec{IsCA: true, CommonName: "cluster-root", SecretName: "cluster-root",
				PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
				IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: "ClusterIssuer", Group: "cert-manager.io"}}},
		&cmapi.ClusterIssuer{ObjectMeta: metav1.ObjectMeta{Name: "cluster-ca"},
			Spec: cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{CA: &cmapi.CAIssuer{SecretName: "cluster-root"}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "viacluster"}},
		&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: "viacluster", Name: "placement"}},
		&v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "viacluster", Name: "fleet"},
			Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "placement"},
				ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "principal.example.com",
					CertManager: &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: "cluster-ca", Kind: "ClusterIssuer"}}}}},
	)
	// Not allowed for the GitOpsCluster's namespace yet: the manager would receive an
	// intermediate CA in the ClusterIssuer's name.
	waitCondition(t, admin, "viacluster", v1alpha1.ReasonIssuerNotAllowed, "ClusterIssuer cluster-ca")
	if err := admin.Get(ctx, types.NamespacedName{Namespace: "viacluster", Name: names.CASecretName}, &corev1.Secret{}); err == nil {
		t.Fatal("a CA was made from a ClusterIssuer nobody allowed")
	}
	ci := &cmapi.ClusterIssuer{}
	if err := admin.Get(ctx, types.NamespacedName{Name: "cluster-ca"}, ci); err != nil {
		t.Fatal(err)
	}
	ci.Annotations = map[string]string{v1alpha1.AnnotationAllowedGitOpsClusterNamespaces: "other, viacluster"}
	if err := admin.Update(ctx, ci); err != nil {
		t.Fatal(err)
	}
	touchGitOpsCluster(t, admin, "viacluster", "fleet")
	eventually(t, "a principal's CA from a ClusterIssuer", func() error {
		s := &corev1.Secret{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: "viacluster", Name: names.CASecretName}, s); err != nil {
			return err
		}
		clusterRoot := &corev1.Secret{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: certmanager.ClusterResourceNamespace, Name: "cluster-root"}, clusterRoot); err != nil {
			return err
		}
		return first(t, s.Data[corev1.TLSCertKey]).CheckSignatureFrom(first(t, clusterRoot.Data[corev1.TLSCertKey]))
	})

	// The cluster's agent runs the template as it is now.
	selfServing := secret(t, admin, principalTL)
	agentApplied(t, admin, goc, "before-the-switch")

	// Switch to cert-manager.
	setIssuer(t, admin, &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: "corp-ca"}})
	var cmCA1 *corev1.Secret
	eventually(t, "the principal's CA secret carries cert-manager's CA", func() error {
		s := caSecret(t, admin)
		if s.Annotations[pkgcm.AnnotationPKISource] != pkgcm.PKISourceCertManager {
			return fmt.Errorf("pki source %q", s.Annotations[pkgcm.AnnotationPKISource])
		}
		issued := &corev1.Secret{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: pkgcm.CAIssuedSecretName}, issued); err != nil {
			return err
		}
		if first(t, issued.Data[corev1.TLSCertKey]).Equal(first(t, s.Data[corev1.TLSCertKey])) == false {
			return fmt.Errorf("tls.crt is not the CA cert-manager issued")
		}
		cmCA1 = s
		return nil
	})
	// The principal keeps its self-managed serving certificate until the agent has applied the
	// template whose bundle trusts the issuer's root.
	waitConditionStatus(t, admin, ns, metav1.ConditionTrue, v1alpha1.ReasonWaitingForTrustRollout, "0 of 1 available agent(s)")
	if !bytes.Equal(secret(t, admin, principalTL).Data[corev1.TLSCertKey], selfServing.Data[corev1.TLSCertKey]) {
		t.Fatal("the serving certificate changed before the agent trusted the issuer")
	}
	agentCatchesUp(t, admin, goc)
	waitCertificatesReady(t, admin, "cert-manager")
	root := first(t, secret(t, admin, "corp-root").Data[corev1.TLSCertKey])
	intermediate := first(t, cmCA1.Data[corev1.TLSCertKey])
	if !intermediate.IsCA || intermediate.CheckSignatureFrom(root) != nil {
		t.Fatalf("the agents' CA %q is not an intermediate of the corporate root", intermediate.Subject)
	}
	// The self-managed CA stays trusted: agents holding its certificates stay connected.
	verifyClient(t, "agent certificate of the self-managed CA after the switch", leafSelf, cmCA1.Data["ca.crt"])
	if containsCert(t, cmCA1.Data["ca.crt"], root) {
		t.Errorf("the principal's client-certificate bundle must not trust the issuer's root (any certificate it signs would pass as an agent)")
	}
	// The serving certificate is cert-manager's, for the discovered host, signed by the
	// corporate root, and the bundle agents get verifies it; the principal was restarted.
	serving := secret(t, admin, principalTL)
	leafServing := first(t, serving.Data[corev1.TLSCertKey])
	if leafServing.CheckSignatureFrom(root) != nil {
		t.Fatalf("principal serving certificate (issuer %q, annotations %v) not signed by the issuer's root %q", leafServing.Issuer, serving.Annotations, root.Subject)
	}
	eventually(t, "agents' bundle trusts the principal's serving certificate", func() error {
		return verify(leafServing, agentBundle(t, admin), x509.ExtKeyUsageServerAuth, "principal.example.com")
	})
	eventually(t, "principal restarted for its cert-manager serving certificate", func() error {
		return principalStamped(admin, serving.Data[corev1.TLSCertKey])
	})
	leafCM1 := signAgentCSR(t, env.Config, cs)
	if leafCM1.CheckSignatureFrom(intermediate) != nil {
		t.Fatalf("the signer did not sign with the CA cert-manager keeps")
	}

	// Renewal forced through cert-manager, as `cmctl renew` does: an Issuing condition.
	forceRenewal(t, admin, pkgcm.CACertificateName)
	var cmCA2 *corev1.Secret
	eventually(t, "cert-manager's renewed CA copied, the old one kept in the bundle", func() error {
		s := caSecret(t, admin)
		if first(t, s.Data[corev1.TLSCertKey]).Equal(intermediate) {
			return fmt.Errorf("still the first cert-manager CA")
		}
		if !containsCert(t, s.Data["ca.crt"], intermediate) {
			return fmt.Errorf("ca.crt lost the previous CA")
		}
		cmCA2 = s
		return nil
	})
	leafCM2 := signAgentCSR(t, env.Config, cs)
	if leafCM2.CheckSignatureFrom(first(t, cmCA2.Data[corev1.TLSCertKey])) != nil {
		t.Fatalf("the signer did not sign with cert-manager's renewed CA")
	}
	for name, leaf := range map[string]*x509.Certificate{"self-managed": leafSelf, "first cert-manager CA": leafCM1, "renewed cert-manager CA": leafCM2} {
		verifyClient(t, "agent certificate of the "+name+" after the renewal", leaf, cmCA2.Data["ca.crt"])
	}
	eventually(t, "cluster secrets carry the renewed bundle", func() error {
		if !containsCert(t, agentBundle(t, admin), first(t, cmCA2.Data[corev1.TLSCertKey])) {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// A serving certificate renewed by cert-manager restarts the principal, as today.
	forceRenewal(t, admin, principalTL)
	eventually(t, "principal restarted for its renewed serving certificate", func() error {
		now := secret(t, admin, principalTL)
		if bytes.Equal(now.Data[corev1.TLSCertKey], serving.Data[corev1.TLSCertKey]) {
			return fmt.Errorf("not renewed yet")
		}
		return principalStamped(admin, now.Data[corev1.TLSCertKey])
	})

	// Back to the self-managed CA: the manager's Certificates go, a CA of its own signs, and
	// the cert-manager CAs stay trusted until they expire.
	setIssuer(t, admin, nil)
	eventually(t, "self-managed CA again, cert-manager's kept in the bundle", func() error {
		s := caSecret(t, admin)
		if s.Annotations[pkgcm.AnnotationPKISource] != "" {
			return fmt.Errorf("still from cert-manager")
		}
		for _, c := range []*corev1.Secret{cmCA1, cmCA2} {
			if !containsCert(t, s.Data["ca.crt"], first(t, c.Data[corev1.TLSCertKey])) {
				return fmt.Errorf("ca.crt lost a cert-manager CA")
			}
		}
		return nil
	})
	waitConditionStatus(t, admin, ns, metav1.ConditionTrue, v1alpha1.ReasonWaitingForTrustRollout, "0 of 1 available agent(s)")
	agentCatchesUp(t, admin, goc)
	waitCertificatesReady(t, admin, "self-managed again")
	back := caSecret(t, admin)
	for name, leaf := range map[string]*x509.Certificate{"self-managed": leafSelf, "first cert-manager CA": leafCM1, "renewed cert-manager CA": leafCM2} {
		verifyClient(t, "agent certificate of the "+name+" after switching back", leaf, back.Data["ca.crt"])
	}
	for _, name := range []string{pkgcm.CACertificateName, principalTL, "argocd-agent-resource-proxy-tls"} {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cmapi.Certificate{}); !apierrors.IsNotFound(err) {
			t.Errorf("Certificate %s after switching back: want NotFound, got %v", name, err)
		}
	}
	eventually(t, "principal serving certificate re-issued by the self-managed CA", func() error {
		leaf := first(t, secret(t, admin, principalTL).Data[corev1.TLSCertKey])
		return leaf.CheckSignatureFrom(first(t, back.Data[corev1.TLSCertKey]))
	})
	leafBack := signAgentCSR(t, env.Config, cs)
	verifyClient(t, "agent certificate of the new self-managed CA", leafBack, back.Data["ca.crt"])
}

// --- helpers ------------------------------------------------------------------------------

// agentApplied writes the cluster's ManagedClusterAddOn status as OCM's addon manager does once
// the agent's work is applied: Available, and the template it last applied with its spec hash.
func agentApplied(t *testing.T, c client.Client, goc *v1alpha1.GitOpsCluster, specHash string) {
	t.Helper()
	ctx := context.Background()
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addon.DefaultAddonName}, mca); apierrors.IsNotFound(err) {
		mca = &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: addon.DefaultAddonName}}
		mustCreate(t, c, mca)
	} else if err != nil {
		t.Fatal(err)
	}
	spec := &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Name: names.TemplateName(goc)}, SpecHash: specHash}
	mca.Status.ConfigReferences = []addonv1alpha1.ConfigReference{{
		ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: addon.ResourceAddOnTemplates},
		ConfigReferent:      spec.ConfigReferent, DesiredConfig: spec, LastAppliedConfig: spec.DeepCopy(),
	}}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable,
		Status: metav1.ConditionTrue, Reason: "Test", Message: "set by the test"})
	if err := c.Status().Update(ctx, mca); err != nil {
		t.Fatal(err)
	}
}

// agentCatchesUp reports the current template applied until the principal's certificates
// are ready (the template may be rewritten once more while cert-manager finishes).
func agentCatchesUp(t *testing.T, c client.Client, goc *v1alpha1.GitOpsCluster) {
	t.Helper()
	eventually(t, "the principal switches once the agent has the new bundle", func() error {
		agentApplied(t, c, goc, templateHash(t, c, goc))
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(goc), g); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionCertificatesReady); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// templateHash is OCM's spec hash of the GitOpsCluster's AddOnTemplate as stored: SHA-256 of
// the JSON of its top-level fields but apiVersion, kind, metadata and status.
func templateHash(t *testing.T, c client.Client, goc *v1alpha1.GitOpsCluster) string {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: addonv1alpha1.GroupName, Version: "v1alpha1", Kind: "AddOnTemplate"})
	if err := c.Get(context.Background(), types.NamespacedName{Name: names.TemplateName(goc)}, u); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
		delete(u.Object, k)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return sha(raw)
}

// startManager starts a manager built like the binary's, as every test of this package
// does in one process (so through testenv, which lets controller names repeat).
func startManager(t *testing.T, cfg *rest.Config, tweaks ...func(*manager.Options)) (stop func()) {
	t.Helper()
	opts := manager.DefaultOptions()
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	stop, err = testenv.StartManager(cfg, scheme, opts)
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	return stop
}

func mustCreate(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	poll.Until(t, what, 90*time.Second, check)
}

func principalDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "principal"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "principal", Image: "quay.io/argoprojlabs/argocd-agent:v0.9.0"}}}}}}
}

func principalStamped(c client.Client, certPEM []byte) error {
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "argocd-agent-principal"}, d); err != nil {
		return err
	}
	if got, want := d.Spec.Template.Annotations["argocd-agent-addon.open-cluster-management.io/principal-tls-sha256"], sha(certPEM); got != want {
		return fmt.Errorf("stamp %q, want %q", got, want)
	}
	return nil
}

func setIssuer(t *testing.T, c client.Client, cm *v1alpha1.CertManagerPKI) {
	t.Helper()
	eventually(t, "updating the GitOpsCluster", func() error {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "fleet"}, g); err != nil {
			return err
		}
		g.Spec.ArgoCDAgentAddon.CertManager = cm
		return c.Update(context.Background(), g)
	})
}

// waitCondition waits for CertificatesReady=False with reason on the GitOpsCluster "fleet" of
// namespace n, its message containing text.
func waitCondition(t *testing.T, c client.Client, n, reason, text string) {
	t.Helper()
	waitConditionStatus(t, c, n, metav1.ConditionFalse, reason, text)
}

// waitConditionStatus waits for CertificatesReady with status and reason on the GitOpsCluster
// "fleet" of namespace n, its message containing text.
func waitConditionStatus(t *testing.T, c client.Client, n string, status metav1.ConditionStatus, reason, text string) {
	t.Helper()
	eventually(t, "CertificatesReady "+reason+" in "+n, func() error {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: n, Name: "fleet"}, g); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionCertificatesReady)
		if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, text) {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// waitCertificatesReady waits until the GitOpsCluster "fleet" has observed its spec and its
// certificates are issued and served (not still waiting for a trust rollout).
func waitCertificatesReady(t *testing.T, c client.Client, what string) {
	t.Helper()
	eventually(t, "CertificatesReady ("+what+")", func() error {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "fleet"}, g); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(g.Status.Conditions, v1alpha1.ConditionCertificatesReady)
		if g.Status.ObservedGeneration != g.Generation || cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonCertificatesIssued {
			return fmt.Errorf("generation %d observed %d, condition %+v", g.Generation, g.Status.ObservedGeneration, cond)
		}
		return nil
	})
}

// forceRenewal does what `cmctl renew` does: it sets the Issuing condition on the Certificate.
func forceRenewal(t *testing.T, c client.Client, name string) {
	t.Helper()
	eventually(t, "marking Certificate "+name+" for renewal", func() error {
		cert := &cmapi.Certificate{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, cert); err != nil {
			return err
		}
		now := metav1.Now()
		cert.Status.Conditions = append(cert.Status.Conditions, cmapi.CertificateCondition{
			Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue, Reason: "ManuallyTriggered",
			Message: "renewal forced by the test", LastTransitionTime: &now, ObservedGeneration: cert.Generation,
		})
		return c.Status().Update(context.Background(), cert)
	})
}

func secret(t *testing.T, c client.Client, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func caSecret(t *testing.T, c client.Client) *corev1.Secret { return secret(t, c, names.CASecretName) }

// agentBundle is the CA bundle of the cluster's registration secret: the bundle the manager
// hands out (the agents' argocd-agent-ca gets the same one through the AddOnTemplate).
func agentBundle(t *testing.T, c client.Client) []byte {
	t.Helper()
	s := secret(t, c, "cluster-"+cluster)
	var cfg struct {
		TLSClientConfig struct {
			CAData []byte `json:"caData"`
		} `json:"tlsClientConfig"`
	}
	if err := json.Unmarshal(s.Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.TLSClientConfig.CAData
}

func first(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCertificates(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func containsCert(t *testing.T, bundle []byte, c *x509.Certificate) bool {
	t.Helper()
	certs, err := pki.ParseCertificates(bundle)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range certs {
		if b.Equal(c) {
			return true
		}
	}
	return false
}

func verify(leaf *x509.Certificate, bundle []byte, usage x509.ExtKeyUsage, host string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("empty bundle")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host})
	return err
}

// verifyClient checks leaf as the principal does an agent's client certificate: against the
// ca.crt bundle of its CA secret.
func verifyClient(t *testing.T, what string, leaf *x509.Certificate, bundle []byte) {
	t.Helper()
	if err := verify(leaf, bundle, x509.ExtKeyUsageClientAuth, ""); err != nil {
		t.Errorf("%s does not verify against the principal's CA bundle: %v", what, err)
	}
}

func grantCSRCreate(t *testing.T, c client.Client) {
	t.Helper()
	if err := testenv.GrantCSRCreate(context.Background(), c, cluster); err != nil {
		t.Fatal(err)
	}
}

// signAgentCSR asks for an agent certificate as the cluster's registration agent does and
// waits for the project's signer to sign it.
func signAgentCSR(t *testing.T, cfg *rest.Config, cs kubernetes.Interface) *x509.Certificate {
	t.Helper()
	csr, err := testenv.AgentCSR(cluster, cluster, addon.DefaultAddonName, addon.DefaultSignerName)
	if err != nil {
		t.Fatal(err)
	}
	created, err := kubernetes.NewForConfigOrDie(testenv.Agent(cluster).Impersonating(cfg)).CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var leaf *x509.Certificate
	eventually(t, "agent CSR signed", func() error {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), created.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Certificate) == 0 {
			return fmt.Errorf("not signed; conditions %+v", got.Status.Conditions)
		}
		block, _ := pem.Decode(got.Status.Certificate)
		if block == nil {
			return fmt.Errorf("no PEM")
		}
		leaf, err = x509.ParseCertificate(block.Bytes)
		return err
	})
	return leaf
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// touchGitOpsCluster annotates a GitOpsCluster, which makes the manager look at it again (what a
// person does after allowing an issuer, whose changes the manager does not watch).
func touchGitOpsCluster(t *testing.T, c client.Client, n, name string) {
	t.Helper()
	eventually(t, "annotating the GitOpsCluster", func() error {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: n, Name: name}, g); err != nil {
			return err
		}
		if g.Annotations == nil {
			g.Annotations = map[string]string{}
		}
		g.Annotations["example.com/touched"] = time.Now().Format(time.RFC3339Nano)
		return c.Update(context.Background(), g)
	})
}
