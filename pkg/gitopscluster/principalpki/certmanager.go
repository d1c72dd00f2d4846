package principalpki

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// CertManagerRecheck is how soon a reconcile looks again while cert-manager has not issued
// everything: the manager does not watch cert-manager's kinds (they may not be installed), but
// it does watch the Secrets cert-manager writes, so this is only a safety net.
const CertManagerRecheck = 30 * time.Second

// certManagerIssuance is a Keeper issuing the principal's PKI through cert-manager: its
// Certificates, the CA they make, and the hand-over of the serving certificate.
type certManagerIssuance struct{ *Keeper }

// Problem is a PKI state a person must act on (or wait for), with the condition reason
// and message that say so. It is not a failed reconcile: nothing is retried faster than
// CertManagerRecheck.
type Problem struct {
	Reason  string
	Message string
	// Pending, with reason PrincipalPKIPending, is the write the principal's elder has yet to
	// make.
	Pending *Change
}

func (p *Problem) Error() string { return p.Message }

// Setting is what the principal namespace's GitOpsClusters ask of its PKI: nil for the
// self-managed CA, else the cert-manager issuer.
type Setting struct {
	Issuer *cmmeta.IssuerReference
	// Namespace is the deciding GitOpsCluster's: the one an issuer must be allowed for.
	Namespace string
}

func SettingOf(goc *v1alpha1.GitOpsCluster) Setting {
	if cm := goc.Spec.ArgoCDAgentAddon.CertManager; cm != nil {
		ref := certmanager.IssuerRef(cm.IssuerRef)
		return Setting{Issuer: &ref, Namespace: goc.Namespace}
	}
	return Setting{Namespace: goc.Namespace}
}

// issuerAllowed returns why the issuer may not sign the principal's CA for a GitOpsCluster of
// namespace gocNS, or nil. The manager receives, in the principal namespace, an intermediate CA
// under the issuer's name: an Issuer of the principal namespace is its owner's to offer, any
// other issuer the hub operator's (the manager's --cert-manager-allowed-issuers, or a
// ClusterIssuer's own annotation listing the namespaces it serves).
func (cm certManagerIssuance) issuerAllowed(ctx context.Context, ref cmmeta.IssuerReference, gocNS string) (*Problem, error) {
	group, kind := ref.Group, ref.Kind
	if group == "" {
		group = certmanager.DefaultIssuerGroup
	}
	if kind == "" {
		kind = cmapi.IssuerKind
	}
	if group == certmanager.DefaultIssuerGroup && kind == cmapi.IssuerKind {
		return nil, nil
	}
	if group != certmanager.DefaultIssuerGroup {
		// An external issuer of a namespaced kind lives in the principal namespace too.
		if m, err := cm.Client.RESTMapper().RESTMapping(schema.GroupKind{Group: group, Kind: kind}); err == nil && m.Scope.Name() == meta.RESTScopeNameNamespace {
			return nil, nil
		}
	}
	for _, a := range cm.Config.CertManagerAllowedIssuers {
		if a == kind+"/"+ref.Name || a == group+"/"+kind+"/"+ref.Name {
			return nil, nil
		}
	}
	if group == certmanager.DefaultIssuerGroup && kind == cmapi.ClusterIssuerKind {
		ci := &metav1.PartialObjectMetadata{}
		ci.SetGroupVersionKind(cmapi.SchemeGroupVersion.WithKind(cmapi.ClusterIssuerKind))
		switch err := cm.Reader.Get(ctx, types.NamespacedName{Name: ref.Name}, ci); {
		case apierrors.IsNotFound(err):
			return &Problem{Reason: v1alpha1.ReasonIssuerNotFound, Message: fmt.Sprintf("ClusterIssuer %s does not exist; create it or fix spec.argoCDAgentAddon.certManager.issuerRef", ref.Name)}, nil
		case meta.IsNoMatchError(err):
			return &Problem{Reason: v1alpha1.ReasonCertManagerNotInstalled, Message: fmt.Sprintf("ClusterIssuer %s: cert-manager's issuer kinds are not served by this hub", ref.Name)}, nil
		case apierrors.IsForbidden(err):
			return forbidden(err, gocNS), nil
		case err != nil:
			return nil, err
		}
		for _, a := range strings.Split(ci.Annotations[v1alpha1.AnnotationAllowedGitOpsClusterNamespaces], ",") {
			if a = strings.TrimSpace(a); a == "*" || a == gocNS {
				return nil, nil
			}
		}
	}
	return &Problem{Reason: v1alpha1.ReasonIssuerNotAllowed, Message: fmt.Sprintf(
		"%s %s (group %s) is not allowed for GitOpsClusters of namespace %s: the manager would receive an intermediate CA in its name. A hub operator allows it with the annotation %s on the ClusterIssuer (namespaces, comma separated, or *), or with the chart value certManager.allowedIssuers; an Issuer in the principal namespace needs neither",
		kind, ref.Name, group, gocNS, v1alpha1.AnnotationAllowedGitOpsClusterNamespaces)}, nil
}

// equal compares what is asked of the PKI, not who asks.
func (s Setting) Equal(o Setting) bool {
	if s.Issuer == nil || o.Issuer == nil {
		return s.Issuer == nil && o.Issuer == nil
	}
	return *s.Issuer == *o.Issuer
}

func (s Setting) String() string {
	if s.Issuer == nil {
		return "the self-managed CA"
	}
	return fmt.Sprintf("cert-manager %s %s (group %s)", s.Issuer.Kind, s.Issuer.Name, s.Issuer.Group)
}

// Decision is how a principal's PKI is kept, as one GitOpsCluster of the principal sees it.
type Decision struct {
	// Setting is the PKI's: its elder's.
	Setting Setting
	// Elder is the member that keeps the PKI, and the only one that writes it.
	Elder types.NamespacedName
	// IsElder: the GitOpsCluster deciding is the elder.
	IsElder bool
	// Conflict, when set, is why the GitOpsCluster's own setting is not followed.
	Conflict *Problem
	// Hosts are the principal addresses its serving certificate names beside its Service's:
	// every member's, so that two GitOpsClusters never re-issue it back and forth.
	Hosts []string
}

// Decide returns how the PKI of principal namespace ns is kept, for goc among the principal's
// members, with discovered the principal address goc found ("" if none). A PKI belongs to the
// principal namespace, so one GitOpsCluster decides: the oldest member (by creation, then
// namespace/name), goc included. A younger one that asks for something else is told so
// (PKIConflict) instead of fighting over the secrets.
func Decide(goc *v1alpha1.GitOpsCluster, members ownership.Members, ns, discovered string) Decision {
	elder := members.Elder(goc, func(*v1alpha1.GitOpsCluster) bool { return true })
	d := Decision{Setting: SettingOf(elder), Elder: types.NamespacedName{Namespace: elder.Namespace, Name: elder.Name}}
	d.IsElder = d.Elder == types.NamespacedName{Namespace: goc.Namespace, Name: goc.Name}
	if own := SettingOf(goc); !own.Equal(d.Setting) {
		d.Conflict = &Problem{Reason: v1alpha1.ReasonPKIConflict, Message: fmt.Sprintf(
			"this GitOpsCluster asks for %s, but the PKI of principal namespace %s follows the older GitOpsCluster %s, which asks for %s; give every GitOpsCluster of that principal the same spec.argoCDAgentAddon.certManager",
			own, ns, d.Elder, d.Setting)}
	}
	if discovered != "" {
		d.Hosts = append(d.Hosts, discovered)
	}
	d.Hosts = append(d.Hosts, members.AddressesOfOthers(goc)...)
	return d
}

// ensureCertManagerPKI keeps the principal's PKI in namespace ns issued by cert-manager:
// Certificates for the agents' CA and the two serving certificates, the CA copied into the
// principal's CA secret with the previous CAs kept in its bundle until they expire, and the
// JWT key (which cert-manager does not make). While cert-manager has not issued the CA yet,
// the CA already in the namespace (for example the self-managed one being replaced) keeps
// serving, so switching never leaves the agents without a CA.
func (k *Keeper) ensureCertManagerPKI(ctx context.Context, ns string, principalHosts []string, ref cmmeta.IssuerReference, gocNS string) (*PKI, error) {
	cm := certManagerIssuance{k}
	if p, err := cm.issuerAllowed(ctx, ref, gocNS); p != nil || err != nil {
		if p != nil {
			return nil, p
		}
		return nil, err
	}
	now := k.Config.Now()
	out := &PKI{}
	mirror, err := cm.certManagerMayWrite(ctx, ns)
	if err != nil {
		return nil, err
	}
	ready, problem, err := cm.applyCertificates(ctx, ns, principalHosts, ref)
	if err != nil {
		return nil, err
	}
	if !ready[certmanager.CACertificateName] {
		if mirror == nil {
			return nil, problem
		}
		// Keep what the principal and agents use now until cert-manager's CA is there.
		kp, err := pki.ParseKeyPair(mirror.Data[corev1.TLSCertKey], mirror.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, problem
		}
		out.CA, out.Bundle = kp, mirror.Data["ca.crt"]
	} else if err := cm.takeIssuedCA(ctx, ns, mirror, now, out); err != nil {
		return nil, err
	}

	if ready[names.PrincipalTLSSecretName] {
		p, err := cm.promoteServingCert(ctx, ns, now, out)
		if err != nil {
			return nil, err
		}
		if problem == nil {
			problem = p
		}
	}
	if err := cm.addServingAnchors(ctx, ns, out); err != nil {
		return nil, err
	}
	if err := k.ensureJWTKey(ctx, ns, out); err != nil {
		return nil, err
	}
	if problem != nil {
		out.Problem = problem
		out.RenewBy(now.Add(CertManagerRecheck))
	} else if k.Config.CertManagerRecheck > 0 {
		out.RenewBy(now.Add(k.Config.CertManagerRecheck))
	}
	return out, nil
}

// certManagerMayWrite refuses a principal namespace whose CA or serving secrets another party
// made (cert-manager would overwrite them), marks a resource-proxy certificate the manager
// issued itself as such, and returns the CA secret the principal reads now (nil if none).
func (cm certManagerIssuance) certManagerMayWrite(ctx context.Context, ns string) (*corev1.Secret, error) {
	mirror, err := cm.getSecret(ctx, ns, names.CASecretName)
	if err != nil {
		return nil, err
	}
	if mirror != nil && !names.ManagedByUs(mirror) {
		return nil, &Problem{Reason: v1alpha1.ReasonPKIConflict, Message: fmt.Sprintf(
			"the CA secret %s/%s was not created by argocd-agent-addon, so it cannot be replaced by the cert-manager CA; delete it, or remove spec.argoCDAgentAddon.certManager to keep using it", ns, names.CASecretName)}
	}
	for _, name := range []string{names.PrincipalTLSSecretName, names.ResourceProxySecretName} {
		s, err := cm.getSecret(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if s != nil && !names.ManagedByUs(s) {
			return nil, &Problem{Reason: v1alpha1.ReasonPKIConflict, Message: fmt.Sprintf(
				"the serving certificate secret %s/%s was not created by argocd-agent-addon and cert-manager would overwrite it; delete it, or remove spec.argoCDAgentAddon.certManager", ns, name)}
		}
		if name == names.ResourceProxySecretName {
			if err := cm.markSelfIssued(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	return mirror, nil
}

// applyCertificates writes the CA and the two serving Certificates for cert-manager and
// returns which are Ready, by name, and what keeps the others from it.
func (cm certManagerIssuance) applyCertificates(ctx context.Context, ns string, principalHosts []string, ref cmmeta.IssuerReference) (map[string]bool, *Problem, error) {
	dnsNames, ips := splitHosts(append(serviceDNSNames(cm.Config.PrincipalServiceName, ns), principalHosts...))
	proxyDNS, proxyIPs := splitHosts(serviceDNSNames(cm.Config.ResourceProxyServiceName, ns))
	desired := []*cmapi.Certificate{
		certmanager.CACertificate(ns, ref, names.ManagedLabels()),
		certmanager.ServingCertificate(ns, names.PrincipalTLSSecretName, certmanager.PrincipalIssuedSecretName, dnsNames, ips, ref, names.ManagedLabels()),
		certmanager.ServingCertificate(ns, names.ResourceProxySecretName, names.ResourceProxySecretName, proxyDNS, proxyIPs, ref, names.ManagedLabels()),
	}
	var notReady []string
	ready := map[string]bool{}
	for _, d := range desired {
		c, err := cm.applyCertificate(ctx, d)
		if err != nil {
			if p := forbidden(err, ns); p != nil {
				return nil, nil, p
			}
			if meta.IsNoMatchError(err) {
				return nil, nil, &Problem{Reason: v1alpha1.ReasonCertManagerNotInstalled, Message: fmt.Sprintf(
					"spec.argoCDAgentAddon.certManager names %s, but cert-manager's Certificate kind (cert-manager.io/v1) is not served by this hub: install cert-manager, or remove certManager to use the self-managed CA",
					certmanager.DescribeIssuer(ns, ref))}
			}
			return nil, nil, err
		}
		ok, why := certmanager.Ready(c)
		ready[d.Name] = ok
		if !ok {
			notReady = append(notReady, why)
		}
	}
	if len(notReady) == 0 {
		return ready, nil, nil
	}
	problem, err := cm.explainNotReady(ctx, ns, ref, notReady)
	return ready, problem, err
}

// takeIssuedCA makes the CA cert-manager issued the principal's: mirrored into the CA secret
// (previous CAs kept in the bundle until they expire) and trusted with its anchors.
func (cm certManagerIssuance) takeIssuedCA(ctx context.Context, ns string, mirror *corev1.Secret, now time.Time, out *PKI) error {
	issued, err := cm.getSecret(ctx, ns, certmanager.CAIssuedSecretName)
	if err != nil {
		return err
	}
	if issued == nil {
		return &Problem{Reason: v1alpha1.ReasonCertManagerCertNotReady, Message: fmt.Sprintf(
			"Certificate %s/%s is Ready but its secret %s does not exist yet", ns, certmanager.CACertificateName, certmanager.CAIssuedSecretName)}
	}
	ca, anchors, err := certmanager.IssuedCA(issued)
	if err != nil {
		return &Problem{Reason: v1alpha1.ReasonCertManagerInvalidSecret, Message: err.Error()}
	}
	bundle, err := cm.mirrorCA(ctx, ns, mirror, ca, now, out)
	if err != nil {
		return err
	}
	out.CA = ca
	out.Bundle = mergeBundles(bundle, pki.EncodeCertificates(anchors...))
	return nil
}

// addServingAnchors adds to the agents' bundle the anchors of the serving certificates:
// whatever the principal reads now (cert-manager's, or the previous PKI's until cert-manager
// has issued and the agents trust it) and the one cert-manager issued for it.
func (cm certManagerIssuance) addServingAnchors(ctx context.Context, ns string, out *PKI) error {
	var extra []*x509.Certificate
	for _, name := range []string{names.PrincipalTLSSecretName, certmanager.PrincipalIssuedSecretName, names.ResourceProxySecretName} {
		s, err := cm.getSecret(ctx, ns, name)
		if err != nil {
			return err
		}
		if s == nil {
			continue
		}
		if name == names.PrincipalTLSSecretName && out.PrincipalCertHash == "" {
			out.PrincipalCertHash = certHash(s.Data[corev1.TLSCertKey])
		}
		extra = append(extra, certmanager.Anchors(s)...)
	}
	out.Bundle = mergeBundles(out.Bundle, pki.EncodeCertificates(extra...))
	return nil
}

// promoteServingCert copies the principal's serving certificate cert-manager issued into the
// Secret the principal reads, with its anchors as ca.crt, once servingSwitch allows it.
func (cm certManagerIssuance) promoteServingCert(ctx context.Context, ns string, now time.Time, out *PKI) (*Problem, error) {
	issued, err := cm.getSecret(ctx, ns, certmanager.PrincipalIssuedSecretName)
	if err != nil || issued == nil {
		return nil, err
	}
	served, err := cm.getSecret(ctx, ns, names.PrincipalTLSSecretName)
	if err != nil {
		return nil, err
	}
	anchors := certmanager.Anchors(issued)
	if len(anchors) == 0 {
		return &Problem{Reason: v1alpha1.ReasonIssuerNoCAAnchor, Message: fmt.Sprintf(
			"the issuer gave no CA certificate with the principal's serving certificate (secret %s/%s has no ca.crt and tls.crt holds no CA above the leaf): agents trust only the bundle the manager hands them and could not verify the principal; use an issuer that returns its CA, such as a CA or Vault issuer", ns, certmanager.PrincipalIssuedSecretName)}, nil
	}
	if !verifiedBy(issued.Data[corev1.TLSCertKey], anchors, now) {
		return &Problem{Reason: v1alpha1.ReasonCertManagerInvalidSecret, Message: fmt.Sprintf(
			"secret %s/%s: the serving certificate does not verify against the CA the issuer gave with it", ns, certmanager.PrincipalIssuedSecretName)}, nil
	}
	caPEM := pki.EncodeCertificates(anchors...)
	if served != nil && slices.Equal(served.Data[corev1.TLSCertKey], issued.Data[corev1.TLSCertKey]) &&
		slices.Equal(served.Data[corev1.TLSPrivateKeyKey], issued.Data[corev1.TLSPrivateKeyKey]) && slices.Equal(served.Data["ca.crt"], caPEM) {
		return nil, nil
	}
	if ok, err := cm.servingSwitch(ctx, ns, served, anchors, now, out); err != nil || !ok {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.PrincipalTLSSecretName, Namespace: ns, Labels: names.ManagedLabels()},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: issued.Data[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: issued.Data[corev1.TLSPrivateKeyKey],
			"ca.crt": caPEM},
	}
	if err := cm.apply(ctx, secretWrite(served, secret)); err != nil {
		return nil, err
	}
	out.Issued = append(out.Issued, names.PrincipalTLSSecretName)
	out.PrincipalCertHash = certHash(secret.Data[corev1.TLSCertKey])
	return nil, nil
}

// markSelfIssued names the self-managed CA as the issuer of a serving secret the manager
// issued itself. cert-manager adopts a valid certificate whose Secret names no issuer instead
// of issuing its own; named, it sees another issuer and re-issues from the spec's.
func (cm certManagerIssuance) markSelfIssued(ctx context.Context, s *corev1.Secret) error {
	if s == nil || s.Annotations[cmapi.IssuerNameAnnotationKey] != "" {
		return nil
	}
	p := client.MergeFrom(s.DeepCopy())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[cmapi.IssuerNameAnnotationKey] = certmanager.SelfManagedIssuerName
	s.Annotations[cmapi.IssuerKindAnnotationKey] = certmanager.SelfManagedIssuerKind
	s.Annotations[cmapi.IssuerGroupAnnotationKey] = certmanager.SelfManagedIssuerGroup
	return cm.apply(ctx, patch(s, p))
}

// explainNotReady turns Certificates that are not Ready into one problem, naming the issuer
// when it is the cause.
func (cm certManagerIssuance) explainNotReady(ctx context.Context, ns string, ref cmmeta.IssuerReference, notReady []string) (*Problem, error) {
	what := certmanager.DescribeIssuer(ns, ref)
	if ref.Group == certmanager.DefaultIssuerGroup {
		var generation int64
		var status *cmapi.IssuerStatus
		var err error
		switch ref.Kind {
		case cmapi.ClusterIssuerKind:
			ci := &cmapi.ClusterIssuer{}
			err = cm.Reader.Get(ctx, types.NamespacedName{Name: ref.Name}, ci)
			generation, status = ci.Generation, &ci.Status
		default:
			is := &cmapi.Issuer{}
			err = cm.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, is)
			generation, status = is.Generation, &is.Status
		}
		switch {
		case apierrors.IsNotFound(err):
			return &Problem{Reason: v1alpha1.ReasonIssuerNotFound, Message: fmt.Sprintf("%s does not exist; create it or fix spec.argoCDAgentAddon.certManager.issuerRef", what)}, nil
		case meta.IsNoMatchError(err):
			return &Problem{Reason: v1alpha1.ReasonCertManagerNotInstalled, Message: fmt.Sprintf("%s: cert-manager's issuer kinds are not served by this hub", what)}, nil
		case apierrors.IsForbidden(err):
			return forbidden(err, ns), nil
		case err != nil:
			return nil, err
		}
		if ok, why := certmanager.IssuerReady(what, generation, status); !ok {
			return &Problem{Reason: v1alpha1.ReasonIssuerNotReady, Message: why}, nil
		}
	}
	return &Problem{Reason: v1alpha1.ReasonCertManagerCertNotReady, Message: "waiting for cert-manager: " + strings.Join(notReady, "; ")}, nil
}

// applyCertificate creates desired or brings the existing Certificate's spec and labels to
// it; it writes nothing when they already match. Certificates are read live: the manager
// must start on hubs without cert-manager, and a cache for a kind whose CRD is missing
// cannot be narrowed (controller-runtime resolves it when the cache is built), so only the
// three Certificates of a principal in cert-manager mode are read, by name.
func (cm certManagerIssuance) applyCertificate(ctx context.Context, desired *cmapi.Certificate) (*cmapi.Certificate, error) {
	existing := &cmapi.Certificate{}
	err := cm.Reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		c := desired.DeepCopy()
		if err := cm.apply(ctx, create(c)); err != nil {
			return nil, err
		}
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if !names.ManagedByUs(existing) {
		return nil, &Problem{Reason: v1alpha1.ReasonPKIConflict, Message: fmt.Sprintf(
			"Certificate %s/%s exists and was not created by argocd-agent-addon; delete it, or remove spec.argoCDAgentAddon.certManager", desired.Namespace, desired.Name)}
	}
	if !certmanager.NeedsUpdate(existing, desired) {
		return existing, nil
	}
	updated := existing.DeepCopy()
	updated.Spec = desired.Spec
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	if err := cm.apply(ctx, update(updated)); err != nil {
		return nil, err
	}
	return updated, nil
}

// mirrorCA writes cert-manager's CA into the principal's CA secret (tls.crt, tls.key), with
// ca.crt holding it and every earlier CA that has not expired: the self-managed CA it
// replaces, or the CA cert-manager renewed. Agents keep certificates from the old CA until
// they renew them, and the principal keeps accepting them meanwhile. It returns ca.crt.
func (cm certManagerIssuance) mirrorCA(ctx context.Context, ns string, existing *corev1.Secret, ca *pki.KeyPair, now time.Time, out *PKI) ([]byte, error) {
	var previous []*x509.Certificate
	if existing != nil {
		if certs, err := pki.ParseCertificates(existing.Data["ca.crt"]); err == nil {
			previous = append(previous, certs...)
		}
		if certs, err := pki.ParseCertificates(existing.Data[corev1.TLSCertKey]); err == nil {
			previous = append(previous, certs...)
		}
	} else {
		recovered, err := cm.trustedByClusterSecrets(ctx, ns)
		if err != nil {
			return nil, err
		}
		previous = recovered
	}
	previous = dedupeCerts(previous, ca.Cert)
	bundle := pki.TrustBundle(ca.Cert, previous, now)
	for _, c := range previous {
		if c.NotAfter.After(now) {
			// The bundle shrinks when an old CA expires.
			out.RenewBy(c.NotAfter.Add(time.Second))
		}
	}
	if existing != nil && existing.Annotations[certmanager.AnnotationPKISource] == certmanager.PKISourceCertManager &&
		slices.Equal(existing.Data[corev1.TLSCertKey], ca.CertPEM) && slices.Equal(existing.Data[corev1.TLSPrivateKeyKey], ca.KeyPEM) &&
		slices.Equal(existing.Data["ca.crt"], bundle) {
		return bundle, nil
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CASecretName, Namespace: ns, Labels: names.ManagedLabels(), Annotations: map[string]string{
			certmanager.AnnotationPKISource: certmanager.PKISourceCertManager,
		}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM, "ca.crt": bundle},
	}
	if existing == nil || !slices.Equal(existing.Data[corev1.TLSCertKey], ca.CertPEM) {
		secret.Annotations[v1alpha1.AnnotationCARotatedAt] = now.UTC().Format(time.RFC3339)
	}
	if err := cm.apply(ctx, secretWrite(existing, secret)); err != nil {
		return nil, err
	}
	out.Issued = append(out.Issued, names.CASecretName)
	return bundle, nil
}

// leaveCertManager runs when a principal namespace goes back to the self-managed CA: it
// deletes the Certificates the manager made, so cert-manager stops re-issuing the serving
// secrets the manager is about to take back. It does nothing unless the CA secret says
// cert-manager wrote it, so hubs that never used cert-manager read nothing of it.
func (k *Keeper) leaveCertManager(ctx context.Context, ns string) error {
	for _, name := range []string{certmanager.CACertificateName, names.PrincipalTLSSecretName, names.ResourceProxySecretName} {
		c := &cmapi.Certificate{}
		err := k.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			continue
		}
		if p := forbidden(err, ns); p != nil {
			return p
		}
		if err != nil {
			return err
		}
		if !names.ManagedByUs(c) {
			continue
		}
		if err := k.apply(ctx, remove(c)); err != nil {
			if p := forbidden(err, ns); p != nil {
				return p
			}
			return err
		}
	}
	issued, err := k.getSecret(ctx, ns, certmanager.PrincipalIssuedSecretName)
	if err != nil || issued == nil || !names.ManagedByUs(issued) {
		return err
	}
	return k.apply(ctx, remove(issued))
}

// forbidden turns an API server's refusal to let the manager at cert-manager's kinds into the
// problem a person fixes (the chart grants them only with certManager.enabled).
func forbidden(err error, ns string) *Problem {
	if !apierrors.IsForbidden(err) {
		return nil
	}
	return &Problem{Reason: v1alpha1.ReasonCertManagerNotAllowed, Message: fmt.Sprintf(
		"the manager may not read or write cert-manager objects for principal namespace %s (%v); install the chart with certManager.enabled=true", ns, err)}
}

// fromCertManager tells whether the principal's CA secret was written from cert-manager's CA.
func fromCertManager(s *corev1.Secret) bool {
	return s != nil && names.ManagedByUs(s) && s.Annotations[certmanager.AnnotationPKISource] == certmanager.PKISourceCertManager
}

// AsProblem returns the problem err carries, if any.
func AsProblem(err error) (*Problem, bool) {
	var p *Problem
	if errors.As(err, &p) && p != nil {
		return p, true
	}
	return nil, false
}
