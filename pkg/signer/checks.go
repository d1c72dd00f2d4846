// Package signer issues the argocd-agent client certificates requested by
// OCM's registration agent through a CustomSigner registration.
//
// This file holds the pure validation of a CertificateSigningRequest: no API
// server, no clock other than Expectation.Now, no I/O. CheckCSR decides
// whether a CSR may be signed; every refusal is a *Rejection whose Reason is
// a stable CamelCase word, fit for a CSR condition reason and a metric label.
package signer

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// Labels OCM's registration agent puts on every addon CSR. They are hints set
// by the requester, so CheckCSR cross-checks them against spec.username.
const (
	ClusterNameLabel = names.CSRClusterNameLabel
	AddonNameLabel   = names.CSRAddonNameLabel
)

// Reasons. Each check has exactly one; they double as metric label values.
const (
	// ReasonInvalidExpectation means the caller passed an incomplete
	// Expectation. It is a programming or configuration error on the hub,
	// not a fault of the CSR: callers should log it and leave the CSR alone.
	ReasonInvalidExpectation = "InvalidExpectation"
	// ReasonWrongSigner: spec.signerName is not this signer's name.
	ReasonWrongSigner = "WrongSigner"
	// ReasonAlreadyFinal: the CSR already carries a certificate or a Denied
	// or Failed condition.
	ReasonAlreadyFinal = "AlreadyFinal"
	// ReasonMissingLabels: a cluster-name or addon-name label is absent,
	// empty or not a valid name.
	ReasonMissingLabels = "MissingLabels"
	// ReasonWrongCluster: the cluster-name label differs from the expected cluster.
	ReasonWrongCluster = "WrongCluster"
	// ReasonWrongAddon: the addon-name label differs from the expected addon.
	ReasonWrongAddon = "WrongAddon"
	// ReasonTooOld: the CSR was created longer ago than Expectation.MaxAge.
	ReasonTooOld = "TooOld"
	// ReasonWrongRequester: spec.username/groups are not the registration
	// agent of the labelled cluster.
	ReasonWrongRequester = "WrongRequester"
	// ReasonForbiddenUsage: spec.usages (or a requested key usage / extended
	// key usage extension) asks for more than a client certificate.
	ReasonForbiddenUsage = "ForbiddenUsage"
	// ReasonUnparsable: spec.request is not exactly one PEM
	// "CERTIFICATE REQUEST" block holding a well-formed PKCS#10 request.
	ReasonUnparsable = "Unparsable"
	// ReasonWeakKey: the public key is not ECDSA P-256/P-384, Ed25519 or
	// RSA of 2048 to 8192 bits.
	ReasonWeakKey = "WeakKey"
	// ReasonBadSignature: the request's self-signature does not verify
	// (or uses an insecure algorithm).
	ReasonBadSignature = "BadSignature"
	// ReasonWeakSignature: the request is signed with an algorithm that is not accepted
	// (SHA-1, MD5, DSA): Go verifies SHA-1 request signatures, so this is checked apart.
	ReasonWeakSignature = "WeakSignature"
	// ReasonCARequested: the request asks for a CA certificate
	// (BasicConstraints cA=TRUE or a keyCertSign/cRLSign key usage).
	ReasonCARequested = "CARequested"
	// ReasonForbiddenExtension: the request asks for an extension other than
	// subjectAltName, basicConstraints, keyUsage and extKeyUsage.
	ReasonForbiddenExtension = "ForbiddenExtension"
	// ReasonWrongCommonName: the subject CN is missing, repeated or not the expected one.
	ReasonWrongCommonName = "WrongCommonName"
	// ReasonWrongOrganization: the subject O values are not exactly the expected set.
	ReasonWrongOrganization = "WrongOrganization"
	// ReasonWrongOrganizationalUnit: the subject OU values are not exactly the expected set.
	ReasonWrongOrganizationalUnit = "WrongOrganizationalUnit"
	// ReasonWrongSubject: the subject carries attributes other than CN, O and
	// OU (C, L, serialNumber, emailAddress, ...), or non-string values.
	ReasonWrongSubject = "WrongSubject"
	// ReasonForbiddenSAN: a subject alternative name other than the allowed
	// DNS names (IP, URI, e-mail, otherName, ... or a duplicate).
	ReasonForbiddenSAN = "ForbiddenSAN"
)

// Reasons lists every reason CheckCSR and ClusterOfCSR can return, in check
// order, e.g. to pre-register metric label values.
func Reasons() []string {
	return []string{
		ReasonInvalidExpectation,
		ReasonWrongSigner,
		ReasonAlreadyFinal,
		ReasonMissingLabels,
		ReasonWrongCluster,
		ReasonWrongAddon,
		ReasonTooOld,
		ReasonWrongRequester,
		ReasonForbiddenUsage,
		ReasonUnparsable,
		ReasonWeakKey,
		ReasonWeakSignature,
		ReasonBadSignature,
		ReasonCARequested,
		ReasonForbiddenExtension,
		ReasonWrongCommonName,
		ReasonWrongOrganization,
		ReasonWrongOrganizationalUnit,
		ReasonWrongSubject,
		ReasonForbiddenSAN,
	}
}

// Rejection explains why a CSR must not be signed.
type Rejection struct {
	// Reason is one of the Reason* constants.
	Reason string
	// Message says, for a person, what was wrong and what was expected.
	Message string
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Message }

func reject(reason, format string, args ...any) *Rejection {
	return &Rejection{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Expectation is what a CSR for one agent of one cluster must look like.
type Expectation struct {
	// SignerName is this signer's name; spec.signerName must equal it.
	SignerName string
	// AddonName is the addon the CSR must be labelled with.
	AddonName string
	// ClusterName is the cluster the CSR labels claim; the caller has
	// already checked it exists and is selected.
	ClusterName string
	// CommonName is the exact expected subject CN.
	CommonName string
	// Organizations is the exact expected set of subject O values (order
	// does not matter; duplicates in the CSR are refused).
	Organizations []string
	// OptionalOrganizations are O values the CSR may carry in addition to
	// Organizations, each at most once (see OCMAuthenticatedGroup).
	OptionalOrganizations []string
	// OrganizationalUnits is the exact expected set of subject OU values,
	// usually empty.
	OrganizationalUnits []string
	// AllowedDNSNames are the only DNS SANs the CSR may carry, each at most
	// once. OCM asks for AddonDNSName(addon).
	AllowedDNSNames []string
	// MaxAge refuses CSRs created longer ago. Zero or negative disables the
	// check. A CSR without creationTimestamp (never the case for objects read
	// from an API server) is not age-checked.
	MaxAge time.Duration
	// Now is the current time; zero means time.Now().
	Now time.Time
}

// Validate reports whether the expectation is complete enough to judge a CSR.
func (e Expectation) Validate() error {
	var missing []string
	if e.SignerName == "" {
		missing = append(missing, "SignerName")
	}
	if e.AddonName == "" {
		missing = append(missing, "AddonName")
	}
	if e.ClusterName == "" {
		missing = append(missing, "ClusterName")
	}
	if e.CommonName == "" {
		missing = append(missing, "CommonName")
	}
	if len(missing) > 0 {
		return fmt.Errorf("signer expectation is missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// AgentName is the agent name OCM uses for a template addon.
func AgentName(addon string) string { return addon + "-agent" }

// DefaultAgentUser is the subject CN OCM requests for a CustomSigner
// registration without explicit subject (addon-framework agent.DefaultUser
// with the template agent name "<addon>-agent").
func DefaultAgentUser(cluster, addon string) string {
	return "system:open-cluster-management:cluster:" + cluster + ":addon:" + addon + ":agent:" + AgentName(addon)
}

// DefaultAgentGroups are the subject O values OCM requests for a
// CustomSigner registration without explicit subject (addon-framework
// agent.DefaultGroups). OCM's hub addon-manager up to v1.2.x (addon-framework
// v1.2.0, also the doc comment in OCM api v1.3.0) adds a third value,
// OCMAuthenticatedGroup, which DefaultExpectation therefore tolerates.
func DefaultAgentGroups(cluster, addon string) []string {
	return []string{
		"system:open-cluster-management:cluster:" + cluster + ":addon:" + addon,
		"system:open-cluster-management:addon:" + addon,
	}
}

// AddonDNSName is the DNS SAN OCM's registration agent puts in addon CSRs.
func AddonDNSName(addon string) string { return addon + ".addon.open-cluster-management.io" }

// RequesterPrefix is the prefix of the user name of a cluster's registration
// agent on the hub; an agent id without ':' follows it.
func RequesterPrefix(cluster string) string { return "system:open-cluster-management:" + cluster + ":" }

// ClusterGroup is the hub group every registration agent of the cluster is in.
func ClusterGroup(cluster string) string { return "system:open-cluster-management:" + cluster }

// DefaultExpectation is the expectation for OCM's default CustomSigner
// subject of the given addon on the given cluster (no clock, no MaxAge).
func DefaultExpectation(signerName, cluster, addon string) Expectation {
	return Expectation{
		SignerName:            signerName,
		AddonName:             addon,
		ClusterName:           cluster,
		CommonName:            DefaultAgentUser(cluster, addon),
		Organizations:         DefaultAgentGroups(cluster, addon),
		OptionalOrganizations: []string{OCMAuthenticatedGroup},
		AllowedDNSNames:       []string{AddonDNSName(addon)},
	}
}

// OCMAuthenticatedGroup is the third O value of OCM's default addon subject in
// addon-framework v1.2.0 (agent.DefaultGroups), which OCM v1.2.x's hub
// addon-manager writes into the ManagedClusterAddOn's registrations and its
// registration agents therefore request. Later releases drop it. It grants
// nothing here: the principal identifies agents by CN, and the hub CA is no
// Kubernetes client CA.
const OCMAuthenticatedGroup = "system:authenticated"

// ClusterOfCSR returns the cluster and addon names the CSR's labels claim.
// The labels are only hints; CheckCSR verifies them against the requester.
func ClusterOfCSR(csr *certificatesv1.CertificateSigningRequest) (cluster, addon string, err *Rejection) {
	if csr == nil {
		return "", "", reject(ReasonMissingLabels, "no CertificateSigningRequest given")
	}
	cluster, addon = csr.Labels[ClusterNameLabel], csr.Labels[AddonNameLabel]
	var problems []string
	for _, l := range []struct{ key, value string }{{ClusterNameLabel, cluster}, {AddonNameLabel, addon}} {
		switch {
		case l.value == "":
			problems = append(problems, fmt.Sprintf("label %s is missing or empty", l.key))
		case len(validation.IsDNS1123Subdomain(l.value)) > 0:
			problems = append(problems, fmt.Sprintf("label %s=%s is not a valid name (lower-case DNS subdomain)", l.key, short(l.value)))
		}
	}
	if len(problems) > 0 {
		return "", "", reject(ReasonMissingLabels,
			"%s; an addon CSR created by OCM's registration agent carries labels %s=<cluster> and %s=<addon>",
			strings.Join(problems, "; "), ClusterNameLabel, AddonNameLabel)
	}
	return cluster, addon, nil
}

// CheckCSR decides whether csr may be signed under exp. It returns the parsed
// request when every check passes, otherwise the first failing check's
// Rejection. Checks run cheapest first in a fixed order, so the reason for a
// given CSR is deterministic: signer name, finality, labels, age, requester,
// spec.usages, PEM/DER parsing, key strength, signature, requested
// extensions, subject (CN, O, OU, other attributes), SANs.
//
// An Approved condition (OCM's addon-manager may add one) is not a reason
// to refuse; whether approval is required before signing is up to the caller.
func CheckCSR(csr *certificatesv1.CertificateSigningRequest, exp Expectation) (*x509.CertificateRequest, *Rejection) {
	if err := exp.Validate(); err != nil {
		return nil, reject(ReasonInvalidExpectation, "%v", err)
	}
	if csr == nil {
		return nil, reject(ReasonUnparsable, "no CertificateSigningRequest given")
	}
	if csr.Spec.SignerName != exp.SignerName {
		return nil, reject(ReasonWrongSigner, "spec.signerName is %s, this signer only handles %s",
			short(csr.Spec.SignerName), short(exp.SignerName))
	}
	if r := checkNotFinal(csr); r != nil {
		return nil, r
	}
	if r := checkLabels(csr, exp); r != nil {
		return nil, r
	}
	if r := checkAge(csr, exp); r != nil {
		return nil, r
	}
	if r := checkRequester(csr, exp.ClusterName); r != nil {
		return nil, r
	}
	if r := checkSpecUsages(csr.Spec.Usages); r != nil {
		return nil, r
	}
	req, r := parseRequest(csr.Spec.Request)
	if r != nil {
		return nil, r
	}
	if r := checkKey(req); r != nil {
		return nil, r
	}
	if !acceptedSignatureAlgorithms[req.SignatureAlgorithm] {
		return nil, reject(ReasonWeakSignature, "the request is signed with %s; expected SHA-256 or stronger with RSA, RSA-PSS or ECDSA, or Ed25519", req.SignatureAlgorithm)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, reject(ReasonBadSignature,
			"the request's signature does not verify with its own public key (%v); it was altered after signing or signed with another key", err)
	}
	if r := checkExtensions(req); r != nil {
		return nil, r
	}
	if r := checkSubject(req, exp); r != nil {
		return nil, r
	}
	if r := checkSANs(req, exp.AllowedDNSNames); r != nil {
		return nil, r
	}
	return req, nil
}

func checkNotFinal(csr *certificatesv1.CertificateSigningRequest) *Rejection {
	if len(csr.Status.Certificate) > 0 {
		return reject(ReasonAlreadyFinal, "a certificate was already issued for this CSR; the agent creates a new CSR to get another one")
	}
	for _, c := range csr.Status.Conditions {
		if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) &&
			c.Status != corev1.ConditionFalse {
			return reject(ReasonAlreadyFinal, "the CSR already has condition %s (reason %s); a final CSR is never signed",
				c.Type, short(c.Reason))
		}
	}
	return nil
}

func checkLabels(csr *certificatesv1.CertificateSigningRequest, exp Expectation) *Rejection {
	cluster, addon, r := ClusterOfCSR(csr)
	if r != nil {
		return r
	}
	if cluster != exp.ClusterName {
		return reject(ReasonWrongCluster, "label %s is %s, expected %s", ClusterNameLabel, short(cluster), exp.ClusterName)
	}
	if addon != exp.AddonName {
		return reject(ReasonWrongAddon, "label %s is %s, this signer only serves addon %s", AddonNameLabel, short(addon), exp.AddonName)
	}
	return nil
}

func checkAge(csr *certificatesv1.CertificateSigningRequest, exp Expectation) *Rejection {
	created := csr.CreationTimestamp.Time
	if exp.MaxAge <= 0 || created.IsZero() {
		return nil
	}
	now := exp.Now
	if now.IsZero() {
		now = time.Now()
	}
	if age := now.Sub(created); age > exp.MaxAge {
		return reject(ReasonTooOld, "the CSR was created %s ago (at %s), more than the allowed %s; the agent will create a fresh one",
			age.Round(time.Second), created.UTC().Format(time.RFC3339), exp.MaxAge)
	}
	return nil
}

func checkRequester(csr *certificatesv1.CertificateSigningRequest, cluster string) *Rejection {
	prefix := RequesterPrefix(cluster)
	user := csr.Spec.Username
	agentID, ok := strings.CutPrefix(user, prefix)
	if !ok || agentID == "" || strings.ContainsAny(agentID, ": \t\r\n") {
		return reject(ReasonWrongRequester,
			"the CSR was created by user %s, but only the registration agent of cluster %s (user %s<agent-id>) may request this certificate",
			short(user), cluster, prefix)
	}
	if group := ClusterGroup(cluster); !slices.Contains(csr.Spec.Groups, group) {
		return reject(ReasonWrongRequester,
			"the requesting user %s is not in group %s, which every registration agent of cluster %s is in",
			short(user), group, cluster)
	}
	return nil
}

var allowedSpecUsages = []certificatesv1.KeyUsage{
	certificatesv1.UsageDigitalSignature,
	certificatesv1.UsageKeyEncipherment,
	certificatesv1.UsageClientAuth,
}

func checkSpecUsages(usages []certificatesv1.KeyUsage) *Rejection {
	var bad []string
	for _, u := range usages {
		if !slices.Contains(allowedSpecUsages, u) {
			bad = append(bad, short(string(u)))
		}
	}
	if len(bad) > 0 {
		return reject(ReasonForbiddenUsage, "spec.usages asks for %s; only %q are allowed for an agent client certificate",
			strings.Join(bad, ", "), allowedSpecUsages)
	}
	if !slices.Contains(usages, certificatesv1.UsageClientAuth) {
		return reject(ReasonForbiddenUsage, "spec.usages %q does not contain %q, which an agent client certificate needs",
			usages, certificatesv1.UsageClientAuth)
	}
	return nil
}

const csrPEMType = "CERTIFICATE REQUEST"

func parseRequest(data []byte) (*x509.CertificateRequest, *Rejection) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, reject(ReasonUnparsable, "spec.request is empty; expected one PEM block of type %q", csrPEMType)
	}
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
		return nil, reject(ReasonUnparsable, "spec.request does not start with a PEM block; expected exactly one PEM block of type %q", csrPEMType)
	}
	block, rest := pem.Decode(trimmed)
	if block == nil {
		return nil, reject(ReasonUnparsable, "spec.request is not valid PEM; expected exactly one PEM block of type %q", csrPEMType)
	}
	if block.Type != csrPEMType {
		return nil, reject(ReasonUnparsable, "spec.request holds a PEM block of type %s; expected %q", short(block.Type), csrPEMType)
	}
	if len(block.Headers) > 0 {
		return nil, reject(ReasonUnparsable, "the PEM block in spec.request has headers; expected a plain %q block", csrPEMType)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		if next, _ := pem.Decode(rest); next != nil {
			return nil, reject(ReasonUnparsable, "spec.request holds more than one PEM block; expected exactly one of type %q", csrPEMType)
		}
		return nil, reject(ReasonUnparsable, "spec.request has data after its PEM block; expected exactly one PEM block of type %q", csrPEMType)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, reject(ReasonUnparsable, "spec.request does not hold a valid PKCS#10 certificate request: %v", err)
	}
	return req, nil
}

var acceptedSignatureAlgorithms = map[x509.SignatureAlgorithm]bool{
	x509.SHA256WithRSA: true, x509.SHA384WithRSA: true, x509.SHA512WithRSA: true,
	x509.SHA256WithRSAPSS: true, x509.SHA384WithRSAPSS: true, x509.SHA512WithRSAPSS: true,
	x509.ECDSAWithSHA256: true, x509.ECDSAWithSHA384: true, x509.ECDSAWithSHA512: true,
	x509.PureEd25519: true,
}

func checkKey(req *x509.CertificateRequest) *Rejection {
	const expected = "expected ECDSA P-256 or P-384, Ed25519, or RSA of 2048 to 8192 bits"
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
		return reject(ReasonWeakKey, "the request's key is ECDSA on curve %s; %s", k.Curve.Params().Name, expected)
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 || bits > 8192 {
			return reject(ReasonWeakKey, "the request's key is RSA with %d bits; %s", bits, expected)
		}
		return nil
	default:
		return reject(ReasonWeakKey, "the request's key is of unsupported type %s (%T); %s", req.PublicKeyAlgorithm, req.PublicKey, expected)
	}
}

var (
	oidExtKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtSubjectAltName   = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidExtBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidExtExtendedKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37}
	oidEKUClientAuth       = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 3, 2}
)

// Key usage bit numbers (RFC 5280 4.2.1.3).
const (
	kuDigitalSignature = 0
	kuKeyEncipherment  = 2
	kuKeyCertSign      = 5
	kuCRLSign          = 6
)

// checkExtensions looks at the extensions the request asks for. The signer
// never copies them into the certificate, but a request asking for a CA or
// for other usages is not one OCM's agent makes, so it is refused.
func checkExtensions(req *x509.CertificateRequest) *Rejection {
	for _, ext := range req.Extensions {
		switch {
		case ext.Id.Equal(oidExtSubjectAltName):
			// checked in checkSANs
		case ext.Id.Equal(oidExtBasicConstraints):
			var bc struct {
				IsCA       bool `asn1:"optional"`
				MaxPathLen int  `asn1:"optional,default:-1"`
			}
			if rest, err := asn1.Unmarshal(ext.Value, &bc); err != nil || len(rest) > 0 {
				return reject(ReasonCARequested, "the request carries a malformed basicConstraints extension; a client certificate request should carry none")
			}
			if bc.IsCA {
				return reject(ReasonCARequested, "the request asks for a CA certificate (basicConstraints cA=TRUE); only end-entity client certificates are issued")
			}
		case ext.Id.Equal(oidExtKeyUsage):
			var bits asn1.BitString
			if rest, err := asn1.Unmarshal(ext.Value, &bits); err != nil || len(rest) > 0 {
				return reject(ReasonForbiddenUsage, "the request carries a malformed keyUsage extension")
			}
			if bits.At(kuKeyCertSign) == 1 || bits.At(kuCRLSign) == 1 {
				return reject(ReasonCARequested, "the request's keyUsage extension asks for keyCertSign or cRLSign; only end-entity client certificates are issued")
			}
			for i := 0; i < bits.BitLength; i++ {
				if bits.At(i) == 1 && i != kuDigitalSignature && i != kuKeyEncipherment {
					return reject(ReasonForbiddenUsage, "the request's keyUsage extension asks for key usage bit %d; only digitalSignature and keyEncipherment are allowed", i)
				}
			}
		case ext.Id.Equal(oidExtExtendedKeyUsage):
			var ekus []asn1.ObjectIdentifier
			if rest, err := asn1.Unmarshal(ext.Value, &ekus); err != nil || len(rest) > 0 {
				return reject(ReasonForbiddenUsage, "the request carries a malformed extKeyUsage extension")
			}
			for _, eku := range ekus {
				if !eku.Equal(oidEKUClientAuth) {
					return reject(ReasonForbiddenUsage, "the request's extKeyUsage extension asks for %s; only clientAuth (%s) is allowed", eku, oidEKUClientAuth)
				}
			}
		default:
			return reject(ReasonForbiddenExtension, "the request asks for extension %s; only subjectAltName, basicConstraints (cA=FALSE), keyUsage and extKeyUsage are accepted", ext.Id)
		}
	}
	return nil
}

var (
	oidCommonName         = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization       = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOrganizationalUnit = asn1.ObjectIdentifier{2, 5, 4, 11}
)

// checkSubject walks the raw subject rather than the flattened pkix.Name,
// so repeated CNs, non-string values and unknown attributes are all seen.
func checkSubject(req *x509.CertificateRequest, exp Expectation) *Rejection {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(req.RawSubject, &rdns); err != nil || len(rest) > 0 {
		return reject(ReasonUnparsable, "the request's subject is not a valid distinguished name")
	}
	var cns, orgs, ous, others []string
	for _, rdn := range rdns {
		for _, atv := range rdn {
			s, isString := atv.Value.(string)
			if !isString {
				others = append(others, fmt.Sprintf("%s (non-string value)", atv.Type))
				continue
			}
			switch {
			case atv.Type.Equal(oidCommonName):
				cns = append(cns, s)
			case atv.Type.Equal(oidOrganization):
				orgs = append(orgs, s)
			case atv.Type.Equal(oidOrganizationalUnit):
				ous = append(ous, s)
			default:
				others = append(others, fmt.Sprintf("%s=%s", atv.Type, short(s)))
			}
		}
	}
	if len(cns) != 1 || cns[0] != exp.CommonName {
		return reject(ReasonWrongCommonName, "the request's subject CN is %s; expected exactly one CN %q",
			shortList(cns), exp.CommonName)
	}
	if !sameSet(withoutOptional(orgs, exp.OptionalOrganizations, exp.Organizations), exp.Organizations) {
		if len(exp.OptionalOrganizations) > 0 {
			return reject(ReasonWrongOrganization, "the request's subject O values are %s; expected exactly %s, optionally with %s once",
				shortList(orgs), shortList(exp.Organizations), shortList(exp.OptionalOrganizations))
		}
		return reject(ReasonWrongOrganization, "the request's subject O values are %s; expected exactly %s",
			shortList(orgs), shortList(exp.Organizations))
	}
	if !sameSet(ous, exp.OrganizationalUnits) {
		return reject(ReasonWrongOrganizationalUnit, "the request's subject OU values are %s; expected exactly %s",
			shortList(ous), shortList(exp.OrganizationalUnits))
	}
	if len(others) > 0 {
		return reject(ReasonWrongSubject, "the request's subject has attributes %s; only CN, O and OU are allowed",
			strings.Join(others, ", "))
	}
	return nil
}

// withoutOptional drops the first occurrence of each optional value that is
// not also required; a repeated optional value stays and fails sameSet.
func withoutOptional(got, optional, required []string) []string {
	if len(optional) == 0 {
		return got
	}
	drop := map[string]bool{}
	for _, o := range optional {
		drop[o] = !slices.Contains(required, o)
	}
	out := make([]string, 0, len(got))
	for _, g := range got {
		if drop[g] {
			drop[g] = false
			continue
		}
		out = append(out, g)
	}
	return out
}

// sameSet reports whether got holds each wanted value exactly once and
// nothing else (wanted itself may contain duplicates).
func sameSet(got, want []string) bool {
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	if len(got) != len(wantSet) {
		return false
	}
	seen := map[string]bool{}
	for _, g := range got {
		if !wantSet[g] || seen[g] {
			return false
		}
		seen[g] = true
	}
	return true
}

// GeneralName tags (RFC 5280 4.2.1.6).
const (
	sanEmail = 1
	sanDNS   = 2
	sanURI   = 6
	sanIP    = 7
)

var sanKinds = map[int]string{0: "otherName", 3: "x400Address", 4: "directoryName", 5: "ediPartyName", 8: "registeredID"}

// checkSANs walks the raw subjectAltName extension: crypto/x509 silently
// drops otherName, directoryName and registeredID entries, which must not be
// overlooked.
func checkSANs(req *x509.CertificateRequest, allowed []string) *Rejection {
	allowedMsg := "none"
	if len(allowed) > 0 {
		allowedMsg = fmt.Sprintf("DNS names %q", allowed)
	}
	// crypto/x509 refuses requests with a repeated extension, so there is
	// at most one subjectAltName extension here.
	var dnsNames []string
	for _, ext := range req.Extensions {
		if !ext.Id.Equal(oidExtSubjectAltName) {
			continue
		}
		var names []asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &names); err != nil || len(rest) > 0 {
			return reject(ReasonForbiddenSAN, "the request's subjectAltName extension is malformed; allowed SANs: %s", allowedMsg)
		}
		for _, n := range names {
			if n.Class != asn1.ClassContextSpecific {
				return reject(ReasonForbiddenSAN, "the request has a malformed subject alternative name; allowed SANs: %s", allowedMsg)
			}
			switch n.Tag {
			case sanDNS:
				if n.IsCompound {
					return reject(ReasonForbiddenSAN, "the request has a malformed DNS SAN; allowed SANs: %s", allowedMsg)
				}
				dnsNames = append(dnsNames, string(n.Bytes))
			case sanEmail:
				return reject(ReasonForbiddenSAN, "the request asks for e-mail SAN %s; allowed SANs: %s", short(string(n.Bytes)), allowedMsg)
			case sanURI:
				return reject(ReasonForbiddenSAN, "the request asks for URI SAN %s; allowed SANs: %s", short(string(n.Bytes)), allowedMsg)
			case sanIP:
				return reject(ReasonForbiddenSAN, "the request asks for an IP address SAN; allowed SANs: %s", allowedMsg)
			default:
				kind, known := sanKinds[n.Tag]
				if !known {
					kind = fmt.Sprintf("unknown type [%d]", n.Tag)
				}
				return reject(ReasonForbiddenSAN, "the request asks for a SAN of type %s; allowed SANs: %s", kind, allowedMsg)
			}
		}
	}
	seen := map[string]bool{}
	for _, d := range dnsNames {
		if !slices.Contains(allowed, d) {
			return reject(ReasonForbiddenSAN, "the request asks for DNS SAN %s; allowed SANs: %s", short(d), allowedMsg)
		}
		if seen[d] {
			return reject(ReasonForbiddenSAN, "the request lists DNS SAN %s more than once", short(d))
		}
		seen[d] = true
	}
	// Defence in depth: what crypto/x509 parsed must agree with the walk above.
	if len(req.IPAddresses)+len(req.URIs)+len(req.EmailAddresses) > 0 || !slices.Equal(req.DNSNames, dnsNames) {
		return reject(ReasonForbiddenSAN, "the request's subject alternative names are inconsistent; allowed SANs: %s", allowedMsg)
	}
	return nil
}

// short quotes a value for a message, cutting very long ones.
func short(s string) string {
	const limit = 200
	if len(s) > limit {
		return fmt.Sprintf("%q...(%d bytes)", s[:limit], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func shortList(values []string) string {
	if len(values) == 0 {
		return "(none)"
	}
	const limit = 8
	parts := make([]string, 0, min(len(values), limit))
	for i, v := range values {
		if i == limit {
			parts = append(parts, fmt.Sprintf("... (%d in all)", len(values)))
			break
		}
		parts = append(parts, short(v))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
