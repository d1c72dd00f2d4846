package fleet

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// ca is one cluster's certificate authority. As in a kubeadm cluster it signs the API server's
// serving certificate, the client certificates the API server accepts (--client-ca-file), and
// what kube-controller-manager issues for kubernetes.io/kube-apiserver-client CSRs.
type ca struct {
	kp       *pki.KeyPair
	certPEM  []byte
	certPath string
	keyPath  string
}

func newCA(dir, name string) (*ca, error) {
	kp, err := pki.NewCA(name+"-ca", 10*365*24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	c := &ca{kp: kp, certPEM: kp.CertPEM, certPath: filepath.Join(dir, "ca.crt"), keyPath: filepath.Join(dir, "ca.key")}
	if err := os.WriteFile(c.certPath, kp.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return c, os.WriteFile(c.keyPath, kp.KeyPEM, 0o600)
}

// issue signs a new key pair: a client certificate for user/groups, or, with hosts, a serving
// certificate.
func (c *ca) issue(commonName string, groups []string, hosts []string) (certPEM, keyPEM []byte, err error) {
	const validity = 5 * 365 * 24 * time.Hour
	var kp *pki.KeyPair
	if len(hosts) > 0 {
		var dns []string
		var ips []net.IP
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				ips = append(ips, ip)
			} else {
				dns = append(dns, h)
			}
		}
		kp, err = c.kp.IssueServerCert(commonName, dns, ips, validity, time.Now())
	} else {
		kp, err = c.kp.IssueClientCert(pkix.Name{CommonName: commonName, Organization: groups}, validity, time.Now())
	}
	if err != nil {
		return nil, nil, err
	}
	return kp.CertPEM, kp.KeyPEM, nil
}

// newServiceAccountKey writes the key pair the API server signs service account tokens with:
// sa.pub (PKIX public key) and sa.key (PKCS#8 private key).
func newServiceAccountKey(dir string) (pubPath, keyPath string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return "", "", err
	}
	keyPEM, err := pemKey(key)
	if err != nil {
		return "", "", err
	}
	pubPath, keyPath = filepath.Join(dir, "sa.pub"), filepath.Join(dir, "sa.key")
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", err
	}
	return pubPath, keyPath, os.WriteFile(keyPath, keyPEM, 0o600)
}

func pemKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// writeKubeconfig writes a kubeconfig with embedded credentials and returns its rest.Config.
func writeKubeconfig(path, clusterName, server string, caPEM, certPEM, keyPEM []byte) (*rest.Config, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: "user"}
	cfg.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return nil, fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: caPEM, CertData: certPEM, KeyData: keyPEM,
		},
		QPS:   100,
		Burst: 200,
	}, nil
}
