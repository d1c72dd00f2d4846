package signer

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

const (
	testSigner  = "argocd-agent-addon.open-cluster-management.io/agent-client"
	testCluster = "cluster1"
	testOther   = "cluster2"
	testAddon   = "argocd-agent"
	testAgentID = "k7x2q"
)

var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type testKeys struct {
	p256, p384, p224 *ecdsa.PrivateKey
	rsa2048, rsa1024 *rsa.PrivateKey
	ed               ed25519.PrivateKey
}

var (
	keysOnce sync.Once
	keys     testKeys
	keysErr  error
)

// mustKeys generates the test keys once per process (RSA is slow).
func mustKeys(t testing.TB) *testKeys {
	t.Helper()
	keysOnce.Do(func() {
		var errs [6]error
		keys.p256, errs[0] = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		keys.p384, errs[1] = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		keys.p224, errs[2] = ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
		keys.rsa2048, errs[3] = rsa.GenerateKey(rand.Reader, 2048)
		keys.rsa1024, errs[4] = rsa.GenerateKey(rand.Reader, 1024)
		_, keys.ed, errs[5] = ed25519.GenerateKey(rand.Reader)
		keysErr = errors.Join(errs[:]...)
	})
	if keysErr != nil {
		t.Fatalf("generating test keys: %v", keysErr)
	}
	return &keys
}

func testExpectation() Expectation {
	exp := DefaultExpectation(testSigner, testCluster, testAddon)
	exp.MaxAge = time.Hour
	exp.Now = testNow
	return exp
}

// defaultTemplate is what OCM's registration agent asks for by default.
func defaultTemplate(cluster string) *x509.CertificateRequest {
	return &x509.CertificateRequest{
		Subject: pkix.Name{
			CommonName:   DefaultAgentUser(cluster, testAddon),
			Organization: DefaultAgentGroups(cluster, testAddon),
		},
		DNSNames: []string{AddonDNSName(testAddon)},
	}
}

func csrPEM(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatalf("creating test CSR: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// csrObject wraps a request the way OCM's registration agent of cluster
// testCluster submits it to the hub.
func csrObject(request []byte) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: "addon-" + testCluster + "-" + testAddon + "-abcde",
			Labels: map[string]string{
				ClusterNameLabel: testCluster,
				AddonNameLabel:   testAddon,
			},
			CreationTimestamp: metav1.NewTime(testNow.Add(-5 * time.Minute)),
		},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request,
			SignerName: testSigner,
			Username:   RequesterPrefix(testCluster) + testAgentID,
			Groups: []string{
				ClusterGroup(testCluster),
				"system:open-cluster-management:managed-clusters",
				"system:authenticated",
			},
			Usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature,
				certificatesv1.UsageKeyEncipherment,
				certificatesv1.UsageClientAuth,
			},
		},
	}
}

func mustExt(t testing.TB, id asn1.ObjectIdentifier, value any) pkix.Extension {
	t.Helper()
	der, err := asn1.Marshal(value)
	if err != nil {
		t.Fatalf("marshalling extension %s: %v", id, err)
	}
	return pkix.Extension{Id: id, Value: der}
}

func TestCheckCSR(t *testing.T) {
	k := mustKeys(t)
	type tc struct {
		name string
		key  crypto.Signer // default P-256
		tmpl func(*x509.CertificateRequest)
		obj  func(*certificatesv1.CertificateSigningRequest)
		exp  func(*Expectation)
		want string // "" means accepted
		msg  string // substring the rejection message must contain
	}
	otherName := func() pkix.Extension {
		// GeneralNames with one otherName [0] { type-id, [0] value }.
		inner, err := asn1.Marshal(struct {
			ID    asn1.ObjectIdentifier
			Value asn1.RawValue `asn1:"tag:0,explicit"`
		}{asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 311, 20, 2, 3}, asn1.RawValue{Tag: asn1.TagUTF8String, Bytes: []byte("admin@example.com")}})
		if err != nil {
			t.Fatal(err)
		}
		var seq asn1.RawValue
		if _, err := asn1.Unmarshal(inner, &seq); err != nil {
			t.Fatal(err)
		}
		names := []asn1.RawValue{
			{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(AddonDNSName(testAddon))},
			{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: seq.Bytes},
		}
		return mustExt(t, oidExtSubjectAltName, names)
	}
	cases := []tc{
		// Accepted requests.
		{name: "happy ECDSA P-256"},
		{name: "happy ECDSA P-384", key: k.p384},
		{name: "happy RSA 2048", key: k.rsa2048},
		{name: "happy Ed25519", key: k.ed},
		{name: "happy with O in other order", tmpl: func(r *x509.CertificateRequest) {
			slices.Reverse(r.Subject.Organization)
		}},
		{name: "happy without any SAN", tmpl: func(r *x509.CertificateRequest) { r.DNSNames = nil }},
		// OCM v1.2.x's addon-manager (addon-framework v1.2.0 agent.DefaultGroups)
		// makes the registration agent ask for this third O value.
		{name: "happy with OCM v1.2's system:authenticated O", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, OCMAuthenticatedGroup)
		}},
		{name: "happy approved by OCM's addon-manager", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApprovedByHubCSRApprovingController",
			}}
		}},
		{name: "happy with harmless requested extensions", tmpl: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{
				mustExt(t, oidExtBasicConstraints, struct{}{}),
				mustExt(t, oidExtKeyUsage, asn1.BitString{Bytes: []byte{0xa0}, BitLength: 3}),
				mustExt(t, oidExtExtendedKeyUsage, []asn1.ObjectIdentifier{oidEKUClientAuth}),
			}
		}},
		{name: "happy with expected OU", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.OrganizationalUnit = []string{"argocd"}
		}, exp: func(e *Expectation) { e.OrganizationalUnits = []string{"argocd"} }},
		{name: "happy without age limit", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.CreationTimestamp = metav1.NewTime(testNow.Add(-30 * 24 * time.Hour))
		}, exp: func(e *Expectation) { e.MaxAge = 0 }},

		// Expectation.
		{name: "incomplete expectation", exp: func(e *Expectation) { e.CommonName = "" }, want: ReasonInvalidExpectation},

		// Signer, finality, labels, age.
		{name: "wrong signer name", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.SignerName = certificatesv1.KubeAPIServerClientSignerName
		}, want: ReasonWrongSigner},
		{name: "already denied", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "NotWanted",
			}}
		}, want: ReasonAlreadyFinal},
		{name: "already failed", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
				{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: ReasonWrongCommonName},
			}
		}, want: ReasonAlreadyFinal},
		{name: "already issued", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Status.Certificate = []byte("-----BEGIN CERTIFICATE-----\n...")
		}, want: ReasonAlreadyFinal},
		{name: "missing cluster label", obj: func(c *certificatesv1.CertificateSigningRequest) {
			delete(c.Labels, ClusterNameLabel)
		}, want: ReasonMissingLabels},
		{name: "missing addon label", obj: func(c *certificatesv1.CertificateSigningRequest) {
			delete(c.Labels, AddonNameLabel)
		}, want: ReasonMissingLabels},
		{name: "no labels at all", obj: func(c *certificatesv1.CertificateSigningRequest) { c.Labels = nil }, want: ReasonMissingLabels},
		{name: "cluster label with colon", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Labels[ClusterNameLabel] = testCluster + ":x"
		}, want: ReasonMissingLabels},
		{name: "labels claim another cluster", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Labels[ClusterNameLabel] = testOther
		}, want: ReasonWrongCluster},
		{name: "wrong addon label", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Labels[AddonNameLabel] = "application-manager"
		}, want: ReasonWrongAddon},
		{name: "too old", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.CreationTimestamp = metav1.NewTime(testNow.Add(-2 * time.Hour))
		}, want: ReasonTooOld},

		// Requester.
		{name: "right CN but another cluster's requester", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = RequesterPrefix(testOther) + testAgentID
			c.Spec.Groups = []string{ClusterGroup(testOther), "system:open-cluster-management:managed-clusters"}
		}, want: ReasonWrongRequester},
		{name: "requester of a cluster whose name extends ours", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = RequesterPrefix(testCluster+"-evil") + testAgentID
		}, want: ReasonWrongRequester},
		{name: "right user but not in the cluster group", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Groups = []string{ClusterGroup(testOther), "system:open-cluster-management:managed-clusters"}
		}, want: ReasonWrongRequester},
		{name: "requester is kubernetes-admin", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "kubernetes-admin"
			c.Spec.Groups = []string{"system:masters", "system:authenticated"}
		}, want: ReasonWrongRequester, msg: `"kubernetes-admin"`},
		{name: "requester is a service account", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:open-cluster-management-hub:addon-manager-controller-sa"
			c.Spec.Groups = []string{"system:serviceaccounts", "system:authenticated"}
		}, want: ReasonWrongRequester},
		{name: "requester is the addon agent itself", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = DefaultAgentUser(testCluster, testAddon)
		}, want: ReasonWrongRequester},
		{name: "requester with nested name under the cluster", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = RequesterPrefix(testCluster) + "addon:" + testAddon
		}, want: ReasonWrongRequester},
		{name: "requester with empty agent id", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = RequesterPrefix(testCluster)
		}, want: ReasonWrongRequester},

		// spec.usages.
		{name: "CA usage requested", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageCertSign)
		}, want: ReasonForbiddenUsage},
		{name: "server auth usage", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageServerAuth)
		}, want: ReasonForbiddenUsage},
		{name: "any usage", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageAny}
		}, want: ReasonForbiddenUsage},
		{name: "no usages", obj: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }, want: ReasonForbiddenUsage},
		{name: "usages without client auth", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}, want: ReasonForbiddenUsage},

		// Request encoding.
		{name: "garbage PEM", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("-----BEGIN CERTIFICATE REQUEST-----\n!!!not base64!!!\n-----END CERTIFICATE REQUEST-----\n")
		}, want: ReasonUnparsable},
		{name: "not PEM at all", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = []byte("hello")
		}, want: ReasonUnparsable},
		{name: "empty request", obj: func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = nil }, want: ReasonUnparsable},
		{name: "PEM block of wrong type", obj: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
		}, want: ReasonUnparsable},
		{name: "PEM block with headers", obj: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			b.Headers = map[string]string{"Proc-Type": "4,ENCRYPTED"}
			c.Spec.Request = pem.EncodeToMemory(b)
		}, want: ReasonUnparsable},
		{name: "two PEM blocks", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(append([]byte{}, c.Spec.Request...), c.Spec.Request...)
		}, want: ReasonUnparsable},
		{name: "text before the PEM block", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append([]byte("subject=CN=admin\n"), c.Spec.Request...)
		}, want: ReasonUnparsable},
		{name: "trailing data after the PEM block", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = append(append([]byte{}, c.Spec.Request...), "junk"...)
		}, want: ReasonUnparsable},
		{name: "PEM with non-CSR DER", obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}})
		}, want: ReasonUnparsable},
		{name: "DER with trailing bytes", obj: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			c.Spec.Request = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: append(b.Bytes, 0)})
		}, want: ReasonUnparsable},

		// Key and signature.
		{name: "RSA 1024", key: k.rsa1024, want: ReasonWeakKey},
		{name: "ECDSA P-224", key: k.p224, want: ReasonWeakKey},
		{name: "bad signature (CN altered after signing)", obj: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			cn := []byte(DefaultAgentUser(testCluster, testAddon))
			i := bytes.Index(b.Bytes, cn)
			if i < 0 {
				t.Fatal("CN not found in DER")
			}
			copy(b.Bytes[i:], DefaultAgentUser(testOther, testAddon)) // same length
			c.Spec.Request = pem.EncodeToMemory(b)
		}, want: ReasonBadSignature},
		{name: "bad signature (signature bit flipped)", obj: func(c *certificatesv1.CertificateSigningRequest) {
			b, _ := pem.Decode(c.Spec.Request)
			b.Bytes[len(b.Bytes)-1] ^= 0x01
			c.Spec.Request = pem.EncodeToMemory(b)
		}, key: k.rsa2048, want: ReasonBadSignature},
		// Go verifies SHA-1 request signatures; the signer must not accept them.
		{name: "SHA-1 signature", tmpl: func(r *x509.CertificateRequest) {
			r.SignatureAlgorithm = x509.SHA1WithRSA
		}, key: k.rsa2048, want: ReasonWeakSignature},
		{name: "ECDSA SHA-1 signature", tmpl: func(r *x509.CertificateRequest) {
			r.SignatureAlgorithm = x509.ECDSAWithSHA1
		}, want: ReasonWeakSignature},

		// Requested extensions.
		{name: "BasicConstraints CA extension", tmpl: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{mustExt(t, oidExtBasicConstraints, struct{ IsCA bool }{true})}
		}, want: ReasonCARequested},
		{name: "keyUsage keyCertSign extension", tmpl: func(r *x509.CertificateRequest) {
			// bit 5 (keyCertSign) set.
			r.ExtraExtensions = []pkix.Extension{mustExt(t, oidExtKeyUsage, asn1.BitString{Bytes: []byte{0x04}, BitLength: 6})}
		}, want: ReasonCARequested},
		{name: "keyUsage dataEncipherment extension", tmpl: func(r *x509.CertificateRequest) {
			// bit 3 (dataEncipherment) set.
			r.ExtraExtensions = []pkix.Extension{mustExt(t, oidExtKeyUsage, asn1.BitString{Bytes: []byte{0x10}, BitLength: 4})}
		}, want: ReasonForbiddenUsage},
		{name: "extKeyUsage serverAuth extension", tmpl: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{mustExt(t, oidExtExtendedKeyUsage,
				[]asn1.ObjectIdentifier{oidEKUClientAuth, {1, 3, 6, 1, 5, 5, 7, 3, 1}})}
		}, want: ReasonForbiddenUsage},
		{name: "unknown extension", tmpl: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{mustExt(t, asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, "x")}
		}, want: ReasonForbiddenExtension},

		// Subject.
		{name: "another cluster's identity in CN", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.CommonName = DefaultAgentUser(testOther, testAddon)
		}, want: ReasonWrongCommonName, msg: DefaultAgentUser(testCluster, testAddon)},
		{name: "another cluster's whole subject", tmpl: func(r *x509.CertificateRequest) {
			*r = *defaultTemplate(testOther)
		}, want: ReasonWrongCommonName},
		{name: "empty CN", tmpl: func(r *x509.CertificateRequest) { r.Subject.CommonName = "" }, want: ReasonWrongCommonName},
		{name: "second CN hidden after the right one", tmpl: func(r *x509.CertificateRequest) {
			// ExtraNames of a type replace the field, so list both CNs there.
			r.Subject.ExtraNames = []pkix.AttributeTypeAndValue{
				{Type: oidCommonName, Value: r.Subject.CommonName},
				{Type: oidCommonName, Value: DefaultAgentUser(testOther, testAddon)},
			}
		}, want: ReasonWrongCommonName},
		{name: "right CN repeated", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.ExtraNames = []pkix.AttributeTypeAndValue{
				{Type: oidCommonName, Value: r.Subject.CommonName},
				{Type: oidCommonName, Value: r.Subject.CommonName},
			}
		}, want: ReasonWrongCommonName},
		{name: "another cluster's O", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = DefaultAgentGroups(testOther, testAddon)
		}, want: ReasonWrongOrganization},
		{name: "extra O", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, "system:masters")
		}, want: ReasonWrongOrganization},
		{name: "optional O twice", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, OCMAuthenticatedGroup, OCMAuthenticatedGroup)
		}, want: ReasonWrongOrganization},
		{name: "optional O instead of a required one", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = []string{r.Subject.Organization[0], OCMAuthenticatedGroup}
		}, want: ReasonWrongOrganization},
		{name: "optional O not allowed by an explicit subject", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = append(r.Subject.Organization, OCMAuthenticatedGroup)
		}, exp: func(e *Expectation) { e.OptionalOrganizations = nil }, want: ReasonWrongOrganization},
		{name: "missing O", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = r.Subject.Organization[:1]
		}, want: ReasonWrongOrganization},
		{name: "duplicate O instead of the second one", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Organization = []string{r.Subject.Organization[0], r.Subject.Organization[0]}
		}, want: ReasonWrongOrganization},
		{name: "OU present when none expected", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.OrganizationalUnit = []string{"ops"}
		}, want: ReasonWrongOrganizationalUnit},
		{name: "expected OU missing", exp: func(e *Expectation) { e.OrganizationalUnits = []string{"argocd"} }, want: ReasonWrongOrganizationalUnit},
		{name: "serialNumber in subject", tmpl: func(r *x509.CertificateRequest) { r.Subject.SerialNumber = "42" }, want: ReasonWrongSubject},
		{name: "country and locality in subject", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.Country = []string{"DE"}
			r.Subject.Locality = []string{"Berlin"}
		}, want: ReasonWrongSubject},
		{name: "emailAddress attribute in subject", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.ExtraNames = []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, Value: "a@b.c"}}
		}, want: ReasonWrongSubject},
		{name: "non-string O value", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.ExtraNames = []pkix.AttributeTypeAndValue{
				{Type: oidOrganization, Value: r.Subject.Organization[0]},
				{Type: oidOrganization, Value: r.Subject.Organization[1]},
				{Type: oidOrganization, Value: 7},
			}
		}, want: ReasonWrongSubject},

		// SANs.
		{name: "extra DNS SAN", tmpl: func(r *x509.CertificateRequest) {
			r.DNSNames = append(r.DNSNames, "argocd-agent-principal.argocd.svc")
		}, want: ReasonForbiddenSAN},
		{name: "other DNS SAN only", tmpl: func(r *x509.CertificateRequest) {
			r.DNSNames = []string{"localhost"}
		}, want: ReasonForbiddenSAN},
		{name: "duplicate DNS SAN", tmpl: func(r *x509.CertificateRequest) {
			r.DNSNames = append(r.DNSNames, r.DNSNames[0])
		}, want: ReasonForbiddenSAN},
		{name: "IP SAN", tmpl: func(r *x509.CertificateRequest) {
			r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")}
		}, want: ReasonForbiddenSAN, msg: "IP address"},
		{name: "URI SAN", tmpl: func(r *x509.CertificateRequest) {
			r.URIs = []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/argocd/sa/principal"}}
		}, want: ReasonForbiddenSAN},
		{name: "email SAN", tmpl: func(r *x509.CertificateRequest) {
			r.EmailAddresses = []string{"admin@example.com"}
		}, want: ReasonForbiddenSAN},
		{name: "otherName SAN hidden from crypto/x509", tmpl: func(r *x509.CertificateRequest) {
			r.ExtraExtensions = []pkix.Extension{otherName()}
		}, want: ReasonForbiddenSAN, msg: "otherName"},

		// Ordering: several faults, the earliest check wins.
		{name: "wrong requester beats wrong subject and SAN", tmpl: func(r *x509.CertificateRequest) {
			r.Subject.CommonName = "kubernetes-admin"
			r.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")}
		}, obj: func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Username = "kubernetes-admin"
		}, want: ReasonWrongRequester},
		{name: "weak key beats wrong CN", key: k.rsa1024, tmpl: func(r *x509.CertificateRequest) {
			r.Subject.CommonName = "x"
		}, want: ReasonWeakKey},
	}

	seenReasons := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.key
			if key == nil {
				key = k.p256
			}
			tmpl := defaultTemplate(testCluster)
			if c.tmpl != nil {
				c.tmpl(tmpl)
			}
			obj := csrObject(csrPEM(t, key, tmpl))
			if c.obj != nil {
				c.obj(obj)
			}
			exp := testExpectation()
			if c.exp != nil {
				c.exp(&exp)
			}
			before := obj.DeepCopy()
			req, rej := CheckCSR(obj, exp)
			if c.want == "" {
				if rej != nil {
					t.Fatalf("expected the CSR to be accepted, got %v", rej)
				}
				if req == nil {
					t.Fatal("accepted CSR but returned no parsed request")
				}
				if req.Subject.CommonName != exp.CommonName {
					t.Fatalf("returned request has CN %q, want %q", req.Subject.CommonName, exp.CommonName)
				}
			} else {
				if rej == nil {
					t.Fatalf("expected rejection %s, the CSR was accepted", c.want)
				}
				if rej.Reason != c.want {
					t.Fatalf("expected reason %s, got %v", c.want, rej)
				}
				if req != nil {
					t.Fatalf("rejected CSR but returned a parsed request")
				}
				if !strings.Contains(rej.Message, c.msg) {
					t.Fatalf("message %q does not mention %q", rej.Message, c.msg)
				}
				if len(rej.Message) < 20 {
					t.Fatalf("message %q is too short to act on", rej.Message)
				}
				if !strings.HasPrefix(rej.Error(), c.want+": ") {
					t.Fatalf("Error() = %q, want it to start with the reason", rej.Error())
				}
				seenReasons[rej.Reason] = true
			}
			// CheckCSR must not modify its input and must be deterministic.
			if !equalCSR(before, obj) {
				t.Fatal("CheckCSR modified the CSR")
			}
			_, again := CheckCSR(obj, exp)
			if (again == nil) != (rej == nil) || (again != nil && *again != *rej) {
				t.Fatalf("second call gave %v, first %v", again, rej)
			}
		})
	}
	// Every reason has at least one case above.
	for _, r := range Reasons() {
		if !seenReasons[r] {
			t.Errorf("no test case produces reason %s", r)
		}
	}
}

func equalCSR(a, b *certificatesv1.CertificateSigningRequest) bool {
	return bytes.Equal(a.Spec.Request, b.Spec.Request) && a.Spec.Username == b.Spec.Username &&
		slices.Equal(a.Spec.Groups, b.Spec.Groups) && slices.Equal(a.Spec.Usages, b.Spec.Usages) &&
		a.Labels[ClusterNameLabel] == b.Labels[ClusterNameLabel] && a.Labels[AddonNameLabel] == b.Labels[AddonNameLabel]
}

func TestCheckCSRNil(t *testing.T) {
	if _, rej := CheckCSR(nil, testExpectation()); rej == nil || rej.Reason != ReasonUnparsable {
		t.Fatalf("CheckCSR(nil) = %v, want %s", rej, ReasonUnparsable)
	}
}

func TestCheckCSRAgeBoundary(t *testing.T) {
	k := mustKeys(t)
	obj := csrObject(csrPEM(t, k.p256, defaultTemplate(testCluster)))
	exp := testExpectation()

	obj.CreationTimestamp = metav1.NewTime(testNow.Add(-exp.MaxAge))
	if _, rej := CheckCSR(obj, exp); rej != nil {
		t.Fatalf("CSR exactly MaxAge old must pass, got %v", rej)
	}
	obj.CreationTimestamp = metav1.NewTime(testNow.Add(-exp.MaxAge - time.Second))
	if _, rej := CheckCSR(obj, exp); rej == nil || rej.Reason != ReasonTooOld {
		t.Fatalf("CSR one second over MaxAge: got %v, want %s", rej, ReasonTooOld)
	}
	// A zero Now means the real clock: the CSR from 2025 is far too old.
	exp.Now = time.Time{}
	obj.CreationTimestamp = metav1.NewTime(testNow)
	if _, rej := CheckCSR(obj, exp); rej == nil || rej.Reason != ReasonTooOld {
		t.Fatalf("zero Now must use the wall clock: got %v, want %s", rej, ReasonTooOld)
	}
}

func TestClusterOfCSR(t *testing.T) {
	obj := csrObject(nil)
	cluster, addon, rej := ClusterOfCSR(obj)
	if rej != nil || cluster != testCluster || addon != testAddon {
		t.Fatalf("ClusterOfCSR = %q, %q, %v; want %q, %q, nil", cluster, addon, rej, testCluster, testAddon)
	}
	for name, labels := range map[string]map[string]string{
		"none":          nil,
		"no cluster":    {AddonNameLabel: testAddon},
		"no addon":      {ClusterNameLabel: testCluster},
		"empty cluster": {ClusterNameLabel: "", AddonNameLabel: testAddon},
		"upper case":    {ClusterNameLabel: "Cluster1", AddonNameLabel: testAddon},
		"slash in addon": {ClusterNameLabel: testCluster,
			AddonNameLabel: "a/b"},
	} {
		obj.Labels = labels
		cluster, addon, rej := ClusterOfCSR(obj)
		if rej == nil || rej.Reason != ReasonMissingLabels || cluster != "" || addon != "" {
			t.Errorf("%s: ClusterOfCSR = %q, %q, %v; want a %s rejection", name, cluster, addon, rej, ReasonMissingLabels)
		}
	}
	if _, _, rej := ClusterOfCSR(nil); rej == nil || rej.Reason != ReasonMissingLabels {
		t.Errorf("ClusterOfCSR(nil) = %v, want %s", rej, ReasonMissingLabels)
	}
}

func TestOCMNames(t *testing.T) {
	if ClusterNameLabel != clusterv1.ClusterNameLabelKey {
		t.Errorf("ClusterNameLabel = %q, OCM uses %q", ClusterNameLabel, clusterv1.ClusterNameLabelKey)
	}
	if AddonNameLabel != addonv1alpha1.AddonLabelKey {
		t.Errorf("AddonNameLabel = %q, OCM uses %q", AddonNameLabel, addonv1alpha1.AddonLabelKey)
	}
	if got, want := DefaultAgentUser("c1", "argocd-agent"),
		"system:open-cluster-management:cluster:c1:addon:argocd-agent:agent:argocd-agent-agent"; got != want {
		t.Errorf("DefaultAgentUser = %q, want %q", got, want)
	}
	if got, want := DefaultAgentGroups("c1", "argocd-agent"), []string{
		"system:open-cluster-management:cluster:c1:addon:argocd-agent",
		"system:open-cluster-management:addon:argocd-agent",
	}; !slices.Equal(got, want) {
		t.Errorf("DefaultAgentGroups = %q, want %q", got, want)
	}
	if got, want := AddonDNSName("argocd-agent"), "argocd-agent.addon.open-cluster-management.io"; got != want {
		t.Errorf("AddonDNSName = %q, want %q", got, want)
	}
	if got, want := RequesterPrefix("c1"), "system:open-cluster-management:c1:"; got != want {
		t.Errorf("RequesterPrefix = %q, want %q", got, want)
	}
	if got, want := ClusterGroup("c1"), "system:open-cluster-management:c1"; got != want {
		t.Errorf("ClusterGroup = %q, want %q", got, want)
	}
	// The reference argocd-agent auth regex must capture the cluster from
	// the CN this package expects.
	re := regexp.MustCompile("^CN=system:open-cluster-management:cluster:([^:]+):addon:argocd-agent:agent:argocd-agent-agent")
	if m := re.FindStringSubmatch("CN=" + DefaultAgentUser("c1", "argocd-agent")); len(m) != 2 || m[1] != "c1" {
		t.Errorf("argocd-agent subject regex does not capture the cluster from %q", DefaultAgentUser("c1", "argocd-agent"))
	}
	// OCM's CN and O exceed the X.520 64-character bound; crypto/x509 must
	// still round-trip them.
	if len(DefaultAgentUser(testCluster, testAddon)) <= 64 {
		t.Errorf("test CN unexpectedly short")
	}
}

func TestReasons(t *testing.T) {
	camel := regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	seen := map[string]bool{}
	for _, r := range Reasons() {
		if !camel.MatchString(r) {
			t.Errorf("reason %q is not CamelCase", r)
		}
		if seen[r] {
			t.Errorf("reason %q listed twice", r)
		}
		seen[r] = true
	}
	if len(seen) != 20 {
		t.Errorf("Reasons() has %d entries, want 20", len(seen))
	}
}

func TestExpectationValidate(t *testing.T) {
	if err := testExpectation().Validate(); err != nil {
		t.Fatalf("complete expectation: %v", err)
	}
	for _, f := range []func(*Expectation){
		func(e *Expectation) { e.SignerName = "" },
		func(e *Expectation) { e.AddonName = "" },
		func(e *Expectation) { e.ClusterName = "" },
		func(e *Expectation) { e.CommonName = "" },
	} {
		e := testExpectation()
		f(&e)
		if e.Validate() == nil {
			t.Errorf("incomplete expectation %+v validated", e)
		}
	}
}

func TestSameSet(t *testing.T) {
	for _, c := range []struct {
		got, want []string
		ok        bool
	}{
		{nil, nil, true},
		{[]string{"a", "b"}, []string{"b", "a"}, true},
		{[]string{"a"}, []string{"a", "a"}, true},
		{[]string{"a", "a"}, []string{"a"}, false},
		{[]string{"a", "a"}, []string{"a", "b"}, false},
		{[]string{"a"}, []string{"a", "b"}, false},
		{[]string{"a", "c"}, []string{"a", "b"}, false},
		{[]string{""}, nil, false},
	} {
		if got := sameSet(c.got, c.want); got != c.ok {
			t.Errorf("sameSet(%q, %q) = %v, want %v", c.got, c.want, got, c.ok)
		}
	}
}

func TestMessagesAreBounded(t *testing.T) {
	obj := csrObject(nil)
	obj.Spec.Username = strings.Repeat("x", 100000)
	_, rej := CheckCSR(obj, testExpectation())
	if rej == nil || rej.Reason != ReasonWrongRequester {
		t.Fatalf("got %v, want %s", rej, ReasonWrongRequester)
	}
	if len(rej.Message) > 1000 {
		t.Fatalf("message is %d bytes long; a huge user name must be cut", len(rej.Message))
	}
}

func BenchmarkCheckCSR(b *testing.B) {
	k := mustKeys(b)
	exp := testExpectation()
	for _, c := range []struct {
		name string
		key  crypto.Signer
	}{{"P256", k.p256}, {"RSA2048", k.rsa2048}, {"Ed25519", k.ed}} {
		obj := csrObject(csrPEM(b, c.key, defaultTemplate(testCluster)))
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, rej := CheckCSR(obj, exp); rej != nil {
					b.Fatal(rej)
				}
			}
		})
	}
	obj := csrObject([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"))
	b.Run("Unparsable", func(b *testing.B) {
		for b.Loop() {
			if _, rej := CheckCSR(obj, exp); rej == nil {
				b.Fatal("accepted garbage")
			}
		}
	})
}
