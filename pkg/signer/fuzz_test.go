package signer

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
)

// FuzzCheckCSR feeds arbitrary spec.request bytes, user names and label
// values to CheckCSR. It must never panic, must always give a known reason
// when it refuses, and must never accept a request that an independent
// reading shows to be for another identity.
func FuzzCheckCSR(f *testing.F) {
	k := mustKeys(f)
	good := csrPEM(f, k.p256, defaultTemplate(testCluster))
	user := RequesterPrefix(testCluster) + testAgentID

	otherCN := defaultTemplate(testCluster)
	otherCN.Subject.CommonName = DefaultAgentUser(testOther, testAddon)
	extraO := defaultTemplate(testCluster)
	extraO.Subject.Organization = append(extraO.Subject.Organization, "system:masters")
	ipSAN := defaultTemplate(testCluster)
	ipSAN.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	dupCN := defaultTemplate(testCluster)
	dupCN.Subject.ExtraNames = []pkix.AttributeTypeAndValue{
		{Type: oidCommonName, Value: dupCN.Subject.CommonName},
		{Type: oidCommonName, Value: DefaultAgentUser(testOther, testAddon)},
	}

	seeds := [][]byte{
		good,
		csrPEM(f, k.p384, defaultTemplate(testCluster)),
		csrPEM(f, k.rsa2048, defaultTemplate(testCluster)),
		csrPEM(f, k.ed, defaultTemplate(testCluster)),
		csrPEM(f, k.p256, defaultTemplate(testOther)),
		csrPEM(f, k.p256, otherCN),
		csrPEM(f, k.p256, extraO),
		csrPEM(f, k.p256, ipSAN),
		csrPEM(f, k.p256, dupCN),
		csrPEM(f, k.rsa1024, defaultTemplate(testCluster)),
		append(append([]byte{}, good...), good...),
		[]byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"),
		nil,
	}
	for _, s := range seeds {
		f.Add(s, user, testCluster, testAddon)
	}
	f.Add(good, RequesterPrefix(testOther)+testAgentID, testCluster, testAddon)
	f.Add(good, user, testOther, testAddon)
	f.Add(good, user, testCluster, "other-addon")
	f.Add(good, "kubernetes-admin", testCluster, testAddon)
	f.Add(good, user+":x", testCluster, testAddon)
	f.Add(good, user, "", "")

	exp := testExpectation()
	f.Fuzz(func(t *testing.T, request []byte, username, clusterLabel, addonLabel string) {
		obj := csrObject(request)
		obj.Spec.Username = username
		obj.Labels = map[string]string{ClusterNameLabel: clusterLabel, AddonNameLabel: addonLabel}

		req, rej := CheckCSR(obj, exp)
		if rej != nil {
			if req != nil {
				t.Fatalf("rejected (%v) but returned a request", rej)
			}
			if !slices.Contains(Reasons(), rej.Reason) || rej.Message == "" {
				t.Fatalf("unknown reason or empty message: %#v", rej)
			}
			return
		}
		if req == nil {
			t.Fatal("accepted without returning the parsed request")
		}
		acceptedCorrectly(t, obj.Spec.Request, username, clusterLabel, addonLabel, req, exp)
	})
}

// acceptedCorrectly re-reads an accepted request with nothing but the
// standard library and checks that it really is the expected identity.
func acceptedCorrectly(t *testing.T, request []byte, username, clusterLabel, addonLabel string,
	req *x509.CertificateRequest, exp Expectation) {
	t.Helper()
	if clusterLabel != exp.ClusterName || addonLabel != exp.AddonName {
		t.Fatalf("accepted labels cluster=%q addon=%q", clusterLabel, addonLabel)
	}
	agentID, ok := strings.CutPrefix(username, "system:open-cluster-management:"+exp.ClusterName+":")
	if !ok || agentID == "" || strings.Contains(agentID, ":") {
		t.Fatalf("accepted requester %q", username)
	}
	block, rest := pem.Decode(bytes.TrimSpace(request))
	if block == nil || block.Type != "CERTIFICATE REQUEST" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("accepted a request that is not exactly one CSR PEM block: %q", request)
	}
	parsed, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatalf("accepted an unparsable request: %v", err)
	}
	if !bytes.Equal(parsed.Raw, req.Raw) {
		t.Fatal("returned request differs from spec.request")
	}
	if err := parsed.CheckSignature(); err != nil {
		t.Fatalf("accepted a request with a bad signature: %v", err)
	}
	if parsed.Subject.CommonName != exp.CommonName {
		t.Fatalf("accepted CN %q, want %q", parsed.Subject.CommonName, exp.CommonName)
	}
	gotO, wantO := slices.Sorted(slices.Values(parsed.Subject.Organization)), slices.Sorted(slices.Values(exp.Organizations))
	if !slices.Equal(gotO, wantO) {
		t.Fatalf("accepted O %q, want %q", gotO, wantO)
	}
	if len(parsed.Subject.OrganizationalUnit) != len(exp.OrganizationalUnits) {
		t.Fatalf("accepted OU %q, want %q", parsed.Subject.OrganizationalUnit, exp.OrganizationalUnits)
	}
	cn := 0
	for _, n := range parsed.Subject.Names {
		switch {
		case n.Type.Equal(oidCommonName):
			cn++
		case n.Type.Equal(oidOrganization), n.Type.Equal(oidOrganizationalUnit):
		default:
			t.Fatalf("accepted subject attribute %s", n.Type)
		}
	}
	if cn != 1 {
		t.Fatalf("accepted %d CNs", cn)
	}
	for _, d := range parsed.DNSNames {
		if !slices.Contains(exp.AllowedDNSNames, d) {
			t.Fatalf("accepted DNS SAN %q", d)
		}
	}
	if len(parsed.IPAddresses)+len(parsed.URIs)+len(parsed.EmailAddresses) > 0 {
		t.Fatal("accepted IP, URI or e-mail SANs")
	}
}
