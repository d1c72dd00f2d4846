package signer_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

func TestPrincipalAuthSubjectRegex(t *testing.T) {
	const want = "^CN=system:open-cluster-management:cluster:([^:]+):addon:argocd-agent-addon:agent:argocd-agent-addon-agent(?:,|$)"
	if got := signer.PrincipalAuthSubjectRegex("argocd-agent-addon"); got != want {
		t.Fatalf("regex %s, want %s", got, want)
	}
	re := regexp.MustCompile(signer.PrincipalAuthSubjectRegex("argocd-agent-addon"))
	for subject, agent := range map[string]string{
		"CN=" + signer.DefaultAgentUser("cluster1", "argocd-agent-addon") + ",O=a+O=b": "cluster1",
		"CN=" + signer.DefaultAgentUser("c-2", "argocd-agent-addon"):                   "c-2",
		"CN=" + signer.DefaultAgentUser("cluster1", "argocd-agent-addon") + "x,O=a":    "",
		"CN=" + signer.DefaultAgentUser("cluster1", "other-addon") + ",O=a":            "",
		"O=a,CN=" + signer.DefaultAgentUser("cluster1", "argocd-agent-addon"):          "",
		"CN=cluster1": "",
	} {
		got := ""
		if m := re.FindStringSubmatch(subject); m != nil {
			got = m[1]
		}
		if got != agent {
			t.Errorf("%s -> agent %q, want %q", subject, got, agent)
		}
	}
	// Addon names are quoted, not taken as patterns.
	if re := regexp.MustCompile(signer.PrincipalAuthSubjectRegex("a.b")); re.MatchString("CN=system:open-cluster-management:cluster:c:addon:aXb:agent:a.b-agent") {
		t.Error("the addon name was used as a pattern")
	}
}

// principal is a TLS server set up like argocd-agent's principal with
// --auth mtls:subject:<PrincipalAuthSubjectRegex>: it requires a client certificate that
// chains to the hub CA, takes the agent name from the regex's first capture group over the
// certificate's Subject.String(), and insists on a DNS label other than its namespace. It
// answers each authenticated agent with its name.
type principal struct {
	addr string
	pool *x509.CertPool
}

func startPrincipal(t *testing.T, ca *pki.KeyPair, namespace string) *principal {
	t.Helper()
	re := regexp.MustCompile(signer.PrincipalAuthSubjectRegex(addonName))
	serving, err := ca.IssueServerCert("argocd-agent-principal", nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	agentName := func(cs tls.ConnectionState) (string, error) {
		if len(cs.PeerCertificates) == 0 {
			return "", errors.New("no client certificate")
		}
		m := re.FindStringSubmatch(cs.PeerCertificates[0].Subject.String())
		if m == nil {
			return "", fmt.Errorf("subject %s does not match the auth regex", cs.PeerCertificates[0].Subject)
		}
		if why := names.ValidAgentName(m[1], namespace); why != "" {
			return "", fmt.Errorf("agent name %q: %s", m[1], why)
		}
		return m[1], nil
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{keyPair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := agentName(cs)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				tc := conn.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if err := tc.Handshake(); err != nil {
					return
				}
				name, err := agentName(tc.ConnectionState())
				if err != nil {
					return
				}
				_, _ = fmt.Fprintf(tc, "agent %s\n", name)
			}()
		}
	}()
	return &principal{addr: ln.Addr().String(), pool: pool}
}

// dial connects as an agent and returns what the principal answered.
func (p *principal) dial(cert tls.Certificate) (string, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", p.addr, &tls.Config{
		RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func TestPrincipalAcceptsOnlySignedAgentIdentities(t *testing.T) {
	h := hub(t)
	keys(t)
	p := startPrincipal(t, h.ca, principalNS)

	// The agent of cluster1 gets a certificate through the signer and is known as cluster1.
	csr := h.createCSR(t, agentOf("cluster1"), csrObject("cluster1", signerName, requestPEM(t, p256, agentRequest("cluster1"))))
	_, cert := h.waitSigned(t, csr.Name)
	agentCert := tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: p256, Leaf: cert}
	got, err := p.dial(agentCert)
	if err != nil || got != "agent cluster1" {
		t.Fatalf("the signed agent certificate: answer %q, error %v", got, err)
	}

	// cluster2's registration agent cannot get cluster1's identity: the signer refuses, whether
	// the CSR claims to be cluster1's or its own.
	for _, tc := range []struct {
		label, want string
	}{{"cluster1", signer.ReasonWrongRequester}, {"cluster2", signer.ReasonWrongCommonName}} {
		forged := h.createCSR(t, agentOf("cluster2"), csrObject(tc.label, signerName, requestPEM(t, p256b, agentRequest("cluster1"))))
		done := h.waitFinal(t, forged.Name)
		f := condition(done, certificatesv1.CertificateFailed)
		if len(done.Status.Certificate) > 0 || f == nil || f.Reason != tc.want {
			t.Errorf("cluster2 asking for cluster1's identity (label %s): certificate %d bytes, Failed %+v, want %s",
				tc.label, len(done.Status.Certificate), f, tc.want)
		}
	}

	// Certificates that do not come from the signer get nowhere either.
	rogue, err := pki.NewCA("argocd-agent-ca", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	copied, err := rogue.IssueClientCert(cert.Subject, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// And a certificate of the hub CA that is not an agent identity (an Argo CD cluster
	// secret's, CN=<cluster>) does not authenticate an agent.
	clusterSecretCert, err := h.ca.IssueClientCert(pkix.Name{CommonName: "cluster1"}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for what, kp := range map[string]*pki.KeyPair{"cluster1's subject from another CA": copied, "a cluster-secret certificate": clusterSecretCert} {
		c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.dial(c); err == nil || got != "" {
			t.Errorf("%s was accepted as %q", what, got)
		}
	}
}
