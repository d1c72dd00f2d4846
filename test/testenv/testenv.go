// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with the
// project's CRDs and OCM's CRDs installed, using the binaries from hack/test-binaries.sh.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
)

// Env is a running API server with a client that knows every type the manager uses.
type Env struct {
	Environment *envtest.Environment
	Config      *rest.Config
	Client      client.Client
	// keptCertDirs are serving-certificate folders a restart kept (envtest removes only the
	// ones it made); Stop removes them.
	keptCertDirs []string
}

// RepoRoot is the project's top-level directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	assetsOnce sync.Once
	assetsDir  string
	assetsErr  error
)

// BinaryAssets returns the directory holding kube-apiserver, etcd and kube-controller-manager:
// $KUBEBUILDER_ASSETS when set, else whatever hack/test-binaries.sh finds or builds.
func BinaryAssets() (string, error) {
	assetsOnce.Do(func() {
		if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
			assetsDir = dir
			return
		}
		cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "test-binaries.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			assetsErr = fmt.Errorf("hack/test-binaries.sh: %w", err)
			return
		}
		assetsDir = strings.TrimSpace(string(out))
	})
	return assetsDir, assetsErr
}

// OCMAPIDir is the module-cache folder of open-cluster-management.io/api at the version this
// module requires, so CRDs taken from it match the Go types exactly.
func OCMAPIDir() (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "open-cluster-management.io/api")
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating open-cluster-management.io/api: %w", err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", fmt.Errorf("open-cluster-management.io/api is not in the module cache; run go mod download")
	}
	return root, nil
}

// OCMCRDDirs returns the folders of the OCM api module that hold the CRDs the hub controllers
// read and write.
func OCMCRDDirs() ([]string, error) {
	root, err := OCMAPIDir()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, d := range []string{"cluster/v1", "cluster/v1beta1", "cluster/v1beta2", "addon/v1alpha1", "work/v1"} {
		dirs = append(dirs, filepath.Join(root, d))
	}
	return dirs, nil
}

// CertManagerCRDDir is the folder hack/cert-manager-crds.sh fills with cert-manager's CRDs of
// the version go.mod pins.
func CertManagerCRDDir() (string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "cert-manager-crds.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/cert-manager-crds.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// startTimeout bounds each of the test API server's processes (etcd, kube-apiserver) in
// starting: beside the suite's fleets (a load of 20 and more on two cores) an API server's
// post-start hooks take longer than envtest's 20 s.
const startTimeout = 2 * time.Minute

// stopTimeout bounds each of them in stopping; past it the process is killed and Stop fails.
// An API server with no clients left stops in a second or two: one that takes longer still
// has a client watching, or has lost the address it serves on (see test/node's harness).
const stopTimeout = 30 * time.Second

var (
	argoOnce sync.Once
	argoDir  string
	argoErr  error
)

// ArgoCDCRDDir returns the folder of Argo CD's CRDs (Application, AppProject, ApplicationSet)
// that hack/argocd-binaries.sh keeps from the pinned Argo CD module ($ARGOCD_BINARIES_DIR when
// set; else the script finds or builds them).
func ArgoCDCRDDir() (string, error) {
	argoOnce.Do(func() {
		dir := os.Getenv("ARGOCD_BINARIES_DIR")
		if dir == "" {
			cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "argocd-binaries.sh"))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				argoErr = fmt.Errorf("hack/argocd-binaries.sh: %w", err)
				return
			}
			dir = strings.TrimSpace(string(out))
		}
		argoDir = filepath.Join(dir, "crds")
	})
	return argoDir, argoErr
}

// Options tune Start.
type Options struct {
	// WithCertManager installs cert-manager's CRDs too (the hub has none by default).
	WithCertManager bool
	// WithArgoCD also installs Argo CD's CRDs (see ArgoCDCRDDir).
	WithArgoCD bool
	// WithoutOCM installs only the project's own CRDs.
	WithoutOCM bool
	// WithoutProjectCRDs leaves the GitOpsCluster CRD out, for tests that install it (Helm).
	WithoutProjectCRDs bool
	// APIServerArgs are extra kube-apiserver flags, name to value.
	APIServerArgs map[string]string
	// APIServerAddress is the IP the API server binds to, advertises and names in its serving
	// certificate, instead of 127.0.0.1: a real node (test/node) reaches it over its veth.
	APIServerAddress string
}

// Start launches the API server. Callers must call Stop.
func Start(opts Options) (*Env, error) {
	assets, err := BinaryAssets()
	if err != nil {
		return nil, err
	}
	var crdDirs []string
	if !opts.WithoutProjectCRDs {
		crdDirs = append(crdDirs, filepath.Join(RepoRoot(), "manifests", "crds"))
	}
	if !opts.WithoutOCM {
		ocm, err := OCMCRDDirs()
		if err != nil {
			return nil, err
		}
		crdDirs = append(crdDirs, ocm...)
	}
	if opts.WithCertManager {
		dir, err := CertManagerCRDDir()
		if err != nil {
			return nil, err
		}
		crdDirs = append(crdDirs, dir)
	}
	if opts.WithArgoCD {
		dir, err := ArgoCDCRDDir()
		if err != nil {
			return nil, err
		}
		crdDirs = append(crdDirs, dir)
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// envtest waits 10 s by default for installed CRDs to be served; Argo CD's are large,
		// and a machine busy with other builds needs longer.
		CRDInstallOptions:        envtest.CRDInstallOptions{MaxTime: time.Minute},
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	api := env.ControlPlane.GetAPIServer()
	if opts.APIServerAddress != "" {
		port, err := freePort(opts.APIServerAddress)
		if err != nil {
			return nil, err
		}
		// envtest puts both in the serving certificate and the client configs only when the
		// port is chosen too.
		api.SecureServing.Address, api.SecureServing.Port = opts.APIServerAddress, strconv.Itoa(port)
		api.Configure().Set("advertise-address", opts.APIServerAddress)
	}
	for k, v := range opts.APIServerArgs {
		api.Configure().Set(k, v)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// Stop shuts the API server and etcd down and removes what a restart kept.
func (e *Env) Stop() error {
	err := e.Environment.Stop()
	for _, dir := range e.keptCertDirs {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	e.keptCertDirs = nil
	return err
}

// freePort returns a TCP port free on ip now.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartForTest starts an Env and stops it when the test ends.
func StartForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a kube-apiserver; skipped with -short")
	}
	env, err := Start(opts)
	if err != nil {
		t.Fatalf("starting test API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping test API server: %v", err)
		}
	})
	return env
}

// KubeconfigFile writes a kubeconfig for the env's admin user into dir and returns its path.
func (e *Env) KubeconfigFile(dir string) (string, error) {
	return e.UserKubeconfigFile(dir, "kubeconfig", "admin", "system:masters")
}

// addUser issues a client certificate for user in groups, signed by the API server's client CA.
func (e *Env) addUser(user string, groups []string) (*envtest.AuthenticatedUser, error) {
	return e.Environment.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
}

// UserConfig is a connection that authenticates as user in groups, with a client certificate:
// what RBAC grants that user is all it may do.
func (e *Env) UserConfig(user string, groups ...string) (*rest.Config, error) {
	u, err := e.addUser(user, groups)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// UserKubeconfigFile writes into dir/file a kubeconfig that authenticates as user in groups,
// with a client certificate, and returns its path: what RBAC grants that user is all it may do.
func (e *Env) UserKubeconfigFile(dir, file, user string, groups ...string) (string, error) {
	u, err := e.addUser(user, groups)
	if err != nil {
		return "", err
	}
	data, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, file)
	return path, os.WriteFile(path, data, 0o600)
}
