package principalpki

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// PKI is what the rest of a reconcile needs from the hub's certificate authority.
type PKI struct {
	CA *pki.KeyPair
	// Bundle is the trust bundle (current CA first, then still-valid previous ones).
	Bundle []byte
	// PrincipalCertHash identifies the principal's current serving certificate.
	PrincipalCertHash string
	// NextRenewal is the earliest time a certificate here must be renewed.
	NextRenewal time.Time
	// Issued names the secrets written in this reconcile.
	Issued []string
	// Problem, when set, is why the PKI is usable but not what the spec asks for yet (for
	// example cert-manager has not issued everything); CertificatesReady reports it.
	Problem *Problem
	// Waiting, when set, says the principal keeps its serving certificate until the agents
	// trust the new one's CA (servingSwitch); Notice, that it could not wait.
	Waiting, Notice string
	// Distrusted is set when an emergency rotation dropped every previous CA: the principal
	// moves to the new CA at once, without waiting for the agents.
	Distrusted bool
	// EmergencyRotation describes an emergency rotation done in this reconcile ("" if none).
	EmergencyRotation string
	// JWTKeyRotatedFor is the token of the JWT signing key's last requested rotation.
	JWTKeyRotatedFor string
}

func (h *PKI) RenewBy(t time.Time) {
	if h.NextRenewal.IsZero() || t.Before(h.NextRenewal) {
		h.NextRenewal = t
	}
}

// Ensure creates what is missing of the principal's PKI in namespace ns: the CA (a CA
// the user put there is adopted and never overwritten), the principal and resource-proxy
// serving certificates and the JWT signing key. Serving certificates are re-issued when their
// SANs must change, when two thirds of their life has passed, or when the CA changed.
func (k *Keeper) Ensure(ctx context.Context, ns string, principalHosts []string, setting Setting) (*PKI, error) {
	if setting.Issuer != nil {
		return k.ensureCertManagerPKI(ctx, ns, principalHosts, *setting.Issuer, setting.Namespace)
	}
	now := k.Config.Now()
	out := &PKI{}

	ca, bundle, err := k.ensureCA(ctx, ns, now, out)
	if err != nil {
		return nil, err
	}
	out.CA, out.Bundle = ca, bundle

	principalNames := serviceDNSNames(k.Config.PrincipalServiceName, ns)
	hash, err := k.ensureServingCert(ctx, ns, names.PrincipalTLSSecretName, k.Config.PrincipalServiceName, append(principalNames, principalHosts...), ca, now, out)
	if err != nil {
		return nil, err
	}
	out.PrincipalCertHash = hash
	// Agents must keep verifying the serving certificate the principal still has (one from
	// cert-manager's issuer after switching back) until it is replaced.
	if served, err := k.getSecret(ctx, ns, names.PrincipalTLSSecretName); err != nil {
		return nil, err
	} else if served != nil {
		out.Bundle = mergeBundles(out.Bundle, served.Data["ca.crt"])
	}
	if _, err := k.ensureServingCert(ctx, ns, names.ResourceProxySecretName, k.Config.ResourceProxyServiceName,
		serviceDNSNames(k.Config.ResourceProxyServiceName, ns), ca, now, out); err != nil {
		return nil, err
	}
	if err := k.ensureJWTKey(ctx, ns, out); err != nil {
		return nil, err
	}
	return out, nil
}

func serviceDNSNames(svc, ns string) []string {
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
}

// getSecret reads a PKI secret. Without managed namespaces the cache holds only the project's
// own Secrets, so one it does not hold (a CA the user put in place) is read live.
func (k *Keeper) getSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: ns, Name: name}
	err := k.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) && k.Config.SecretsCacheLabelled() {
		err = k.Reader.Get(ctx, key, s)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}

// ensureCA returns the CA key pair and the trust bundle. A CA of ours is rotated once two
// thirds of its life has passed; the old CA stays in ca.crt until it expires, so agents and
// leaves signed by it keep working while they are re-issued.
func (k *Keeper) ensureCA(ctx context.Context, ns string, now time.Time, out *PKI) (*pki.KeyPair, []byte, error) {
	existing, err := k.getSecret(ctx, ns, names.CASecretName)
	if err != nil {
		return nil, nil, err
	}
	d := decideCA(existing, now)
	out.Distrusted = d.distrusted
	switch d.step {
	case caAdopted:
		if d.invalid != nil {
			return nil, nil, fmt.Errorf("the CA secret %s/%s was not created by argocd-agent-addon and cannot be used: %w", ns, names.CASecretName, d.invalid)
		}
		kp := d.current
		bundle := kp.CertPEM
		if extra := existing.Data["ca.crt"]; len(extra) > 0 {
			bundle = mergeBundles(pki.EncodeCertificates(kp.Cert), extra)
		}
		out.RenewBy(pki.RenewalTime(kp.Cert))
		return kp, bundle, nil
	case caKept:
		out.RenewBy(pki.RenewalTime(d.current.Cert))
		return d.current, existing.Data["ca.crt"], nil
	}
	leaving, emergency := d.leaving, d.emergency
	if leaving {
		// Back from cert-manager: stop it re-issuing the serving secrets, then mint a CA of
		// our own below, keeping cert-manager's trusted until it expires.
		if err := k.leaveCertManager(ctx, ns); err != nil {
			return nil, nil, err
		}
	}

	ca, err := pki.NewCA("argocd-agent-ca", k.Config.CAValidity, now)
	if err != nil {
		return nil, nil, err
	}
	previous, err := k.previousCAs(ctx, ns, existing, emergency, ca.Cert)
	if err != nil {
		return nil, nil, err
	}
	bundle := pki.TrustBundle(ca.Cert, previous, now)
	if leaving {
		delete(existing.Annotations, certmanager.AnnotationPKISource)
	}
	annotations := map[string]string{v1alpha1.AnnotationCARotatedAt: now.UTC().Format(time.RFC3339)}
	if emergency {
		// Every previous CA is dropped from the bundle now: the principal stops trusting
		// agent certificates they signed, and its serving certificate moves at once.
		annotations[v1alpha1.AnnotationCARotatedFor] = existing.Annotations[v1alpha1.AnnotationRotateCANow]
		annotations[v1alpha1.AnnotationCADistrustedAt] = annotations[v1alpha1.AnnotationCARotatedAt]
		out.EmergencyRotation = fmt.Sprintf("emergency CA rotation %q in %s: a new CA was made and every previous CA is no longer trusted; "+
			"agents reconnect once they hold a certificate of the new CA (at their next renewal, or at once when their client-certificate Secret is deleted on the cluster)",
			existing.Annotations[v1alpha1.AnnotationRotateCANow], ns)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CASecretName, Namespace: ns, Labels: names.ManagedLabels(), Annotations: annotations},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM, "ca.crt": bundle},
	}
	if err := k.apply(ctx, secretWrite(existing, secret)); err != nil {
		return nil, nil, err
	}
	out.Issued = append(out.Issued, names.CASecretName)
	out.RenewBy(pki.RenewalTime(ca.Cert))
	return ca, bundle, nil
}

// caStep is what becomes of the principal's CA.
type caStep int

const (
	// caMade: a new CA of ours is made (none yet, a renewal, an emergency rotation, or back
	// from cert-manager).
	caMade caStep = iota
	// caKept: ours, and not due for renewal.
	caKept
	// caAdopted: the user's, used as it is and never written.
	caAdopted
)

// caDecision is what decideCA decided.
type caDecision struct {
	step caStep
	// current is the CA in place, kept or adopted; invalid is why an adopted one cannot be used.
	current *pki.KeyPair
	invalid error
	// leaving: the CA in place is cert-manager's, whose Certificates go before a CA of ours
	// is made.
	leaving bool
	// emergency: a requested rotation that drops every previous CA; distrusted: the CA in
	// place came from one, so the principal moves to it without waiting for the agents.
	emergency, distrusted bool
}

// decideCA decides, from the principal's CA secret (nil if none), whether its CA is kept,
// adopted or made anew.
func decideCA(existing *corev1.Secret, now time.Time) caDecision {
	if existing == nil {
		return caDecision{step: caMade}
	}
	if fromCertManager(existing) {
		return caDecision{step: caMade, leaving: true}
	}
	kp, perr := pki.ParseKeyPair(existing.Data[corev1.TLSCertKey], existing.Data[corev1.TLSPrivateKeyKey])
	if !names.ManagedByUs(existing) {
		return caDecision{step: caAdopted, current: kp, invalid: perr}
	}
	token := existing.Annotations[v1alpha1.AnnotationRotateCANow]
	d := caDecision{step: caMade, emergency: token != "" && token != existing.Annotations[v1alpha1.AnnotationCARotatedFor]}
	distrustedAt := existing.Annotations[v1alpha1.AnnotationCADistrustedAt]
	d.distrusted = d.emergency || (distrustedAt != "" && distrustedAt == existing.Annotations[v1alpha1.AnnotationCARotatedAt])
	if perr == nil && !pki.NeedsRenewal(kp.Cert, now) && !d.emergency {
		d.step, d.current = caKept, kp
	}
	return d
}

// previousCAs are the CAs a new CA's bundle keeps trusting: every CA agents may still trust or
// be signed by (none after an emergency rotation), or, when the CA secret was deleted (by hand,
// or a namespace restore that missed it), the CAs that every cluster secret's bundle names:
// agents still hold certificates from them, and cutting every agent off is worse than trusting
// them until they expire.
func (k *Keeper) previousCAs(ctx context.Context, ns string, existing *corev1.Secret, emergency bool, newCA *x509.Certificate) ([]*x509.Certificate, error) {
	var previous []*x509.Certificate
	if existing != nil && !emergency {
		if certs, err := pki.ParseCertificates(existing.Data["ca.crt"]); err == nil {
			previous = append(previous, certs...)
		}
		if certs, err := pki.ParseCertificates(existing.Data[corev1.TLSCertKey]); err == nil {
			previous = append(previous, certs...)
		}
	}
	if existing == nil {
		recovered, err := k.trustedByClusterSecrets(ctx, ns)
		if err != nil {
			return nil, err
		}
		previous = append(previous, recovered...)
	}
	return dedupeCerts(previous, newCA), nil
}

// trustedByClusterSecrets returns the CAs that signed the client certificates of the cluster
// secrets this project wrote in the principal namespace: the CAs it made. Nothing else of a
// cluster secret's bundle is taken, and no other cluster secret counts: an Argo CD cluster
// secret someone else keeps there names the CA of its own cluster, which must never come to be
// trusted for agents.
func (k *Keeper) trustedByClusterSecrets(ctx context.Context, ns string) ([]*x509.Certificate, error) {
	var secrets corev1.SecretList
	if err := k.Client.List(ctx, &secrets, client.UnsafeDisableDeepCopy, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelSecretType: "cluster"}); err != nil {
		return nil, err
	}
	seen := sets.New[string]()
	var out []*x509.Certificate
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if !names.ManagedByUs(s) {
			continue
		}
		cert, bundle := agentsecret.Contents(s)
		if cert.Issuer == "" || seen.Has(cert.Issuer) {
			continue
		}
		certs, err := pki.ParseCertificates(bundle)
		if err != nil {
			continue
		}
		for _, c := range certs {
			if pki.Fingerprint(c) == cert.Issuer {
				seen.Insert(cert.Issuer)
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func dedupeCerts(certs []*x509.Certificate, exclude *x509.Certificate) []*x509.Certificate {
	seen := sets.New(pki.Fingerprint(exclude))
	var out []*x509.Certificate
	for _, c := range certs {
		fp := pki.Fingerprint(c)
		if !seen.Has(fp) && c.IsCA {
			seen.Insert(fp)
			out = append(out, c)
		}
	}
	return out
}

// mergeBundles returns the certificates of first, then the CA certificates of rest that first
// does not hold.
func mergeBundles(first []byte, rest []byte) []byte {
	a, _ := pki.ParseCertificates(first)
	b, _ := pki.ParseCertificates(rest)
	if len(a) == 0 {
		return rest
	}
	have := sets.New[string]()
	for _, c := range a {
		have.Insert(pki.Fingerprint(c))
	}
	out := a
	for _, c := range b {
		if fp := pki.Fingerprint(c); c.IsCA && !have.Has(fp) {
			have.Insert(fp)
			out = append(out, c)
		}
	}
	if len(out) == len(a) {
		return first
	}
	return pki.EncodeCertificates(out...)
}

// ensureServingCert keeps a kubernetes.io/tls secret whose certificate covers hosts and is
// signed by the current CA. It returns the SHA-256 of the certificate in use.
func (k *Keeper) ensureServingCert(ctx context.Context, ns, name, cn string, hosts []string, ca *pki.KeyPair, now time.Time, out *PKI) (string, error) {
	dnsNames, ips := splitHosts(hosts)
	existing, err := k.getSecret(ctx, ns, name)
	if err != nil {
		return "", err
	}
	if existing != nil {
		if !names.ManagedByUs(existing) {
			// A serving certificate the user provided is theirs to manage.
			return certHash(existing.Data[corev1.TLSCertKey]), nil
		}
		if cert, fits := servingCertFits(existing, dnsNames, ips, ca, now); fits {
			out.RenewBy(pki.RenewalTime(cert))
			return certHash(existing.Data[corev1.TLSCertKey]), nil
		}
		if name == names.PrincipalTLSSecretName && !out.Distrusted {
			// Agents verify the principal with the bundle of the template OCM last applied
			// on their cluster: a certificate from a new CA waits until they have it.
			if ok, err := k.servingSwitch(ctx, ns, existing, []*x509.Certificate{ca.Cert}, now, out); err != nil || !ok {
				return certHash(existing.Data[corev1.TLSCertKey]), err
			}
		}
	}
	kp, err := ca.IssueServerCert(cn, dnsNames, ips, k.Config.ServerCertValidity, now)
	if err != nil {
		return "", fmt.Errorf("issuing %s: %w", name, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: names.ManagedLabels()},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM, "ca.crt": ca.CertPEM},
	}
	if err := k.apply(ctx, secretWrite(existing, secret)); err != nil {
		return "", err
	}
	out.Issued = append(out.Issued, name)
	out.RenewBy(pki.RenewalTime(kp.Cert))
	return certHash(kp.CertPEM), nil
}

// servingCertFits decides whether a serving secret of ours stays as it is: its certificate
// covers dnsNames and ips, is not due for renewal, and verifies against ca, which its ca.crt
// holds alone. It returns the certificate.
func servingCertFits(existing *corev1.Secret, dnsNames []string, ips []net.IP, ca *pki.KeyPair, now time.Time) (*x509.Certificate, bool) {
	kp, err := pki.ParseKeyPair(existing.Data[corev1.TLSCertKey], existing.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, false
	}
	return kp.Cert, pki.SANsMatch(kp.Cert, dnsNames, ips) && !pki.NeedsRenewal(kp.Cert, now) &&
		pki.VerifyChain(kp.Cert, []*x509.Certificate{ca.Cert}, x509.ExtKeyUsageServerAuth, now) == nil &&
		bytes.Equal(existing.Data["ca.crt"], ca.CertPEM)
}

func (k *Keeper) ensureJWTKey(ctx context.Context, ns string, out *PKI) error {
	existing, err := k.getSecret(ctx, ns, names.JWTSecretName)
	if err != nil {
		return err
	}
	due, token, rotatedFor := jwtKeyDue(existing)
	out.JWTKeyRotatedFor = rotatedFor
	if !due {
		return nil
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.JWTSecretName, Namespace: ns, Labels: names.ManagedLabels()},
		Type:       corev1.SecretTypeOpaque,
	}
	if token != "" {
		secret.Annotations = map[string]string{v1alpha1.AnnotationJWTKeyRotatedFor: token}
	}
	w := secretWrite(existing, secret)
	writeKey := w.make
	// The key is taken only when it is written: an Observer leaves the spare key to the elder.
	w.make = func(ctx context.Context, c client.Client) error {
		key, err := k.JWTKeys.Take(ctx)
		if err != nil {
			return err
		}
		secret.Data = map[string][]byte{names.JWTSecretKey: key}
		return writeKey(ctx, c)
	}
	if err := k.apply(ctx, w); err != nil {
		return err
	}
	if token != "" {
		out.JWTKeyRotatedFor = token
	}
	out.Issued = append(out.Issued, names.JWTSecretName)
	return nil
}

// jwtKeyDue decides on the JWT signing key from its Secret (nil if none): whether a key is to
// be written, the rotation token it answers ("" for none), and the token of the key in place.
// A Secret the user put there is theirs, whatever it holds.
func jwtKeyDue(existing *corev1.Secret) (due bool, token, rotatedFor string) {
	if existing == nil {
		return true, "", ""
	}
	if !names.ManagedByUs(existing) {
		return false, "", ""
	}
	rotatedFor = existing.Annotations[v1alpha1.AnnotationJWTKeyRotatedFor]
	if t := existing.Annotations[v1alpha1.AnnotationRotateJWTKeyNow]; t != "" && t != rotatedFor {
		return true, t, rotatedFor
	}
	return pki.ValidateJWTSigningKey(existing.Data[names.JWTSecretKey]) != nil, "", rotatedFor
}

func splitHosts(hosts []string) ([]string, []net.IP) {
	dns := sets.New[string]()
	ipSet := map[string]net.IP{}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ipSet[ip.String()] = ip
			continue
		}
		dns.Insert(h)
	}
	ipKeys := make([]string, 0, len(ipSet))
	for k := range ipSet {
		ipKeys = append(ipKeys, k)
	}
	sort.Strings(ipKeys)
	ips := make([]net.IP, 0, len(ipKeys))
	for _, k := range ipKeys {
		ips = append(ips, ipSet[k])
	}
	return sets.List(dns), ips
}

func certHash(pemBytes []byte) string {
	sum := sha256.Sum256(pemBytes)
	return hex.EncodeToString(sum[:])
}

// RestartPrincipalIfNeeded stamps the principal's pod template with the hash of its serving
// certificate and the token of the JWT signing key's last rotation; a new certificate or key
// changes the stamp and so rolls the principal, which reads both only at start-up. It reports whether it did.
func (k *Keeper) RestartPrincipalIfNeeded(ctx context.Context, goc *v1alpha1.GitOpsCluster, ns, certHash, jwtRotation string) (bool, error) {
	if certHash == "" {
		return false, nil
	}
	if v := goc.Spec.ArgoCDAgentAddon.RestartPrincipalOnCertificateChange; v != nil && !*v {
		return false, nil
	}
	dep := &appsv1.Deployment{}
	if err := k.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: k.Config.PrincipalDeploymentName}, dep); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	annotations := dep.Spec.Template.Annotations
	if annotations[v1alpha1.AnnotationPrincipalTLSHash] == certHash && (jwtRotation == "" || annotations[v1alpha1.AnnotationJWTKeyRotatedFor] == jwtRotation) {
		return false, nil
	}
	p := client.MergeFrom(dep.DeepCopy())
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations[v1alpha1.AnnotationPrincipalTLSHash] = certHash
	if jwtRotation != "" {
		dep.Spec.Template.Annotations[v1alpha1.AnnotationJWTKeyRotatedFor] = jwtRotation
	}
	if err := k.apply(ctx, patch(dep, p)); err != nil {
		return false, err
	}
	return true, nil
}
