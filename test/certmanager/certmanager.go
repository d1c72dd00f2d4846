// Package certmanager runs cert-manager's own issuing controllers in the test process against
// an API server, so the project's cert-manager PKI is tested against the real controllers, not
// a stand-in. cert-manager's controller binary is a separate module the Go module proxy does
// not serve, but every controller it runs lives in packages of the main module
// (github.com/cert-manager/cert-manager): each registers a constructor with
// pkg/controller.Register from its init function, and a ContextFactory built from a kubeconfig
// supplies the clients and informer factories they share. Start does what the binary's start-up
// does for the controllers a CA Issuer needs.
package certmanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Controllers are the cert-manager controllers Start runs, by their registered names: the
// Certificate pipeline (trigger, key manager, request manager, issuing, readiness, revision
// manager), the approver of CertificateRequests, the CA issuer's CertificateRequest signer and
// the Issuer and ClusterIssuer readiness controllers. The self-signed Issuer is registered too,
// so a test can make its root CA through cert-manager.
var Controllers = []string{
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"issuers",
	"clusterissuers",
}

// ClusterResourceNamespace is where ClusterIssuers read their secrets, as cert-manager's
// --cluster-resource-namespace.
const ClusterResourceNamespace = "cert-manager"

// Start runs Controllers against the API server of cfg until ctx ends. The returned function
// waits for them to stop.
func Start(ctx context.Context, cfg *rest.Config, dir string) (wait func(), err error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "cert-manager.kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return nil, err
	}
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   100,
		KubernetesAPIBurst: 200,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: ClusterResourceNamespace},
		CertificateOptions: controllerpkg.CertificateOptions{
			// cert-manager's defaults (1h to 32h) would stall a test after one failure.
			CertificateRequestMinimumBackoffDuration: time.Second,
			CertificateRequestMaximumBackoffDuration: 5 * time.Second,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building cert-manager's controller context: %w", err)
	}
	known := controllerpkg.Known()
	var run []controllerpkg.Interface
	for _, name := range Controllers {
		construct, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("cert-manager controller %q is not registered (known: %v)", name, sortedKeys(known))
		}
		c, err := construct(factory)
		if err != nil {
			return nil, fmt.Errorf("constructing cert-manager controller %q: %w", name, err)
		}
		run = append(run, c)
	}
	// Every controller registered its informers while being constructed; they share one
	// Context, so starting its factories once serves them all.
	shared, err := factory.Build()
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for i, c := range run {
		wg.Go(func() {
			if err := c.Run(2, ctx); err != nil && ctx.Err() == nil {
				panic(fmt.Sprintf("cert-manager controller %s stopped: %v", Controllers[i], err))
			}
		})
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	return wg.Wait, nil
}

func sortedKeys(m map[string]controllerpkg.Constructor) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// writeKubeconfig writes the credentials of cfg (envtest's: client certificate or token) as a
// kubeconfig, the only way cert-manager's ContextFactory takes a cluster.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile, Token: cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}
