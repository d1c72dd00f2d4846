package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// kcmControllers are the kube-controller-manager controllers every cluster without a node runs.
// No workload controllers (deployment, replicaset, ...): without a kubelet no pod ever runs, and
// the deployment controller would overwrite what MarkDeploymentAvailable writes. A cluster with
// a real node runs them all (nodeKCMControllers).
var kcmControllers = []string{
	"certificatesigningrequest-signing-controller", // kubernetes.io/kube-apiserver-client CSRs
	"certificatesigningrequest-cleaner-controller",
	"garbage-collector-controller", // owner references
	"namespace-controller",         // finishes namespace deletion
	"serviceaccount-controller",    // "default" service accounts
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
}

// controlPlane is one cluster: etcd, kube-apiserver and kube-controller-manager.
type controlPlane struct {
	name            string
	dir             string
	ca              *ca
	url             string
	etcdURL         string
	adminConfig     *rest.Config
	adminKubeconfig string
	kcmHealthz      string
	// serviceAccountKey signs the API server's ServiceAccount tokens; the controller manager
	// signs with it too.
	serviceAccountKey string
	// node is the cluster's real node (Options.RealNodes), nil without; the API server listens
	// on its host end.
	node *node.Node

	// admin is the cluster-admin client, made once (its REST mapper discovers the API lazily).
	adminMu sync.Mutex
	admin   client.Client
}

// adminClient is the cluster's cluster-admin client with the fleet's scheme.
func (cp *controlPlane) adminClient(scheme *runtime.Scheme) (client.Client, error) {
	cp.adminMu.Lock()
	defer cp.adminMu.Unlock()
	if cp.admin == nil {
		c, err := client.NewWithWatch(cp.adminConfig, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		cp.admin = retryingClient(c, busyRetryBudget)
	}
	return cp.admin, nil
}

// startControlPlane starts etcd, kube-apiserver and kube-controller-manager for one cluster
// and waits until each is healthy.
func (f *Fleet) startControlPlane(ctx context.Context, name string) (*controlPlane, error) {
	dir := filepath.Join(f.dir, name)
	for _, d := range []string{"pki", "etcd", "apiserver", "kcm"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	cp := &controlPlane{name: name, dir: dir}
	f.begunMu.Lock()
	f.begun = append(f.begun, cp)
	f.begunMu.Unlock()
	var err error
	if cp.ca, err = newCA(filepath.Join(dir, "pki"), name); err != nil {
		return nil, err
	}
	bindAddress := "127.0.0.1"
	if f.opts.RealNodes {
		if cp.node, err = f.prepareNode(cp); err != nil {
			return nil, err
		}
		bindAddress = cp.node.HostIP()
	}
	if err := f.startEtcd(ctx, cp); err != nil {
		return nil, err
	}
	if err := f.startAPIServer(ctx, cp, bindAddress); err != nil {
		return nil, err
	}
	if err := f.startControllerManager(cp); err != nil {
		return nil, err
	}
	if cp.node != nil {
		if err := f.startNode(ctx, cp); err != nil {
			return nil, err
		}
	}
	f.logf("%s: API server up at %s", name, cp.url)
	return cp, nil
}

// etcdArgs are the extra flags of cp's etcd (Options.HubEtcdArgs for the hub's).
func (f *Fleet) etcdArgs(cp *controlPlane) []string {
	if cp.name != "hub" {
		return nil
	}
	return f.opts.HubEtcdArgs
}

// startEtcd starts the cluster's etcd and waits until it is healthy.
func (f *Fleet) startEtcd(ctx context.Context, cp *controlPlane) error {
	clientPort, err := freePorts.next()
	if err != nil {
		return err
	}
	peerPort, err := freePorts.next()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	cp.etcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if _, err := f.start(ProcessSpec{
		Name: cp.name + "-etcd",
		Path: filepath.Join(f.k8sBin, "etcd"),
		Args: append([]string{
			"--name=" + cp.name,
			"--data-dir=" + filepath.Join(cp.dir, "etcd"),
			"--listen-client-urls=" + etcdURL,
			"--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=" + cp.name + "=" + peerURL,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, f.etcdArgs(cp)...),
	}, tierEtcd); err != nil {
		return err
	}
	return f.poll(ctx, cp.name+" etcd", startBudget, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, etcdURL+"/health", false)
		return err == nil && strings.Contains(body, `"health":"true"`), err
	})
}

// startAPIServer starts the cluster's kube-apiserver on bindAddress, writes its admin
// kubeconfig and waits until it is ready.
func (f *Fleet) startAPIServer(ctx context.Context, cp *controlPlane, bindAddress string) error {
	apiPort, err := freePorts.next()
	if err != nil {
		return err
	}
	cp.url = "https://" + bindAddress + ":" + strconv.Itoa(apiPort)
	pki := filepath.Join(cp.dir, "pki")
	saPub, err := cp.writeAPIServerPKI(bindAddress)
	if err != nil {
		return err
	}
	nodeArgs, err := cp.apiServerNodeArgs()
	if err != nil {
		return err
	}
	if _, err := f.start(ProcessSpec{
		Name: cp.name + "-kube-apiserver",
		Path: filepath.Join(f.k8sBin, "kube-apiserver"),
		Args: append(append([]string{
			"--etcd-servers=" + cp.etcdURL,
			"--bind-address=" + bindAddress,
			"--advertise-address=" + bindAddress,
			"--secure-port=" + strconv.Itoa(apiPort),
			"--cert-dir=" + filepath.Join(cp.dir, "apiserver"),
			"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
			"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
			"--client-ca-file=" + cp.ca.certPath,
			"--service-account-issuer=" + cp.url,
			"--service-account-key-file=" + saPub,
			"--service-account-signing-key-file=" + cp.serviceAccountKey,
			"--service-cluster-ip-range=" + node.ServiceCIDR,
			"--requestheader-client-ca-file=" + cp.ca.certPath,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + filepath.Join(pki, "front-proxy.crt"),
			"--proxy-client-key-file=" + filepath.Join(pki, "front-proxy.key"),
			"--allow-privileged=true",
			"--profiling=false",
		}, nodeArgs...), f.opts.APIServerArgs...),
	}, tierAPIServer); err != nil {
		return err
	}
	adminCert, adminKey, err := cp.ca.issue("fleet-admin", []string{"system:masters"}, nil)
	if err != nil {
		return err
	}
	cp.adminKubeconfig = filepath.Join(cp.dir, "admin.kubeconfig")
	if cp.adminConfig, err = writeKubeconfig(cp.adminKubeconfig, cp.name, cp.url, cp.ca.certPEM, adminCert, adminKey); err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	// Budgets, not sleeps: the e2e lanes of real nodes starting on 2 cores beside the image builds
	// have kept an API server from being ready for over 90 s.
	if err := f.poll(ctx, cp.name+" kube-apiserver", startBudget, func(ctx context.Context) (bool, error) {
		body, err := kc.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}); err != nil {
		return err
	}
	return nil
}

// writeAPIServerPKI writes the API server's serving and front-proxy certificates and the
// ServiceAccount signing key, and returns the key's public half.
func (cp *controlPlane) writeAPIServerPKI(bindAddress string) (string, error) {
	pki := filepath.Join(cp.dir, "pki")
	// 10.0.0.1 is the kubernetes Service's address in --service-cluster-ip-range: what pods use.
	servingCert, servingKey, err := cp.ca.issue("kube-apiserver", nil, []string{
		bindAddress, "127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
	})
	if err != nil {
		return "", err
	}
	// The front-proxy (aggregation) client, as kubeadm sets it up; with it, the
	// extension-apiserver-authentication ConfigMap is complete and delegated authentication in
	// kube-controller-manager and the OCM processes stops complaining.
	proxyCert, proxyKey, err := cp.ca.issue("front-proxy-client", nil, nil)
	if err != nil {
		return "", err
	}
	if err := writeFiles(map[string][]byte{
		filepath.Join(pki, "apiserver.crt"):   servingCert,
		filepath.Join(pki, "apiserver.key"):   servingKey,
		filepath.Join(pki, "front-proxy.crt"): proxyCert,
		filepath.Join(pki, "front-proxy.key"): proxyKey,
	}); err != nil {
		return "", err
	}
	saPub, saKey, err := newServiceAccountKey(pki)
	if err != nil {
		return "", err
	}
	cp.serviceAccountKey = saKey
	return saPub, nil
}

// startControllerManager starts the cluster's kube-controller-manager.
func (f *Fleet) startControllerManager(cp *controlPlane) error {
	// kube-controller-manager, signing with the cluster CA the API server trusts for clients.
	// As kubeadm runs it: its own user (which the API server's bootstrap RBAC grants what it
	// needs), each controller with its own ServiceAccount's credentials.
	kcmKubeconfig, _, err := cp.userKubeconfig("kcm", "system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	kcmPort, err := freePorts.next()
	if err != nil {
		return err
	}
	if _, err := f.start(ProcessSpec{
		Name: cp.name + "-kube-controller-manager",
		Path: filepath.Join(f.k8sBin, "kube-controller-manager"),
		Args: []string{
			"--kubeconfig=" + kcmKubeconfig,
			"--authentication-kubeconfig=" + kcmKubeconfig,
			"--authorization-kubeconfig=" + kcmKubeconfig,
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(kcmPort),
			"--cert-dir=" + filepath.Join(cp.dir, "kcm"),
			"--leader-elect=false",
			"--use-service-account-credentials=true",
			"--controllers=" + strings.Join(cp.kcmControllers(), ","),
			"--cluster-signing-cert-file=" + cp.ca.certPath,
			"--cluster-signing-key-file=" + cp.ca.keyPath,
			"--root-ca-file=" + cp.ca.certPath,
			"--service-account-private-key-file=" + cp.serviceAccountKey,
			"--concurrent-gc-syncs=5",
			"--profiling=false",
		},
	}, tierController); err != nil {
		return err
	}
	// Nothing needs kube-controller-manager before an agent's CSR, so its health is checked at
	// the end of Start (waitKCM) rather than here.
	cp.kcmHealthz = fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort)
	return nil
}

// waitKCM waits until the cluster's kube-controller-manager reports healthy.
func (f *Fleet) waitKCM(ctx context.Context, cp *controlPlane) error {
	return f.poll(ctx, cp.name+" kube-controller-manager", startBudget, func(ctx context.Context) (bool, error) {
		body, err := httpGet(ctx, cp.kcmHealthz, true)
		return err == nil && body == "ok", err
	})
}

// userKubeconfig issues a client certificate for user/groups signed by the cluster CA and writes
// a kubeconfig for it named <dir>/<file>.kubeconfig.
func (cp *controlPlane) userKubeconfig(file, user string, groups []string) (string, *rest.Config, error) {
	cert, key, err := cp.ca.issue(user, groups, nil)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(cp.dir, file+".kubeconfig")
	cfg, err := writeKubeconfig(path, cp.name, cp.url, cp.ca.certPEM, cert, key)
	return path, cfg, err
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// httpGet fetches a health endpoint; insecure skips TLS verification (self-signed serving certs
// of kube-controller-manager).
func httpGet(ctx context.Context, url string, insecure bool) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	if insecure {
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // local health check
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}
