package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Real nodes
//
// With Options.RealNodes each cluster's API server listens on the host end of its node's veth
// (10.251.<index>.1) instead of loopback, authorizes with Node,RBAC, admits with
// NodeRestriction and ServiceAccount (pods get their token volume), and reaches the kubelet by
// its InternalIP with a client certificate that the ClusterRole system:kubelet-api-admin binds,
// never system:masters. kube-controller-manager runs every controller but node IPAM (the CNI
// configuration gives each node its pod range), and a kube-scheduler places the pods.
//
// Images: nothing is pulled from outside the machine. The fleet serves an image registry on
// the hub node's host address (RegistryHost); an image added with AddImage is pushed there and
// imported into every node's containerd, so pods find it whether their pull policy is Always
// (the registry answers, as a user's mirror would: Argo CD's manifests pull Always) or
// IfNotPresent/Never.

// kubeletClientUser is the API server's identity towards the kubelets (logs, exec, port-forward).
const kubeletClientUser = "kube-apiserver-kubelet-client"

var (
	nodeBinOnce sync.Once
	nodeBinDir  string
	nodeBinErr  error
)

// NodeBinaries returns the folder hack/node-binaries.sh prints (kubelet, kube-proxy,
// kube-scheduler; it honours NODE_BINARIES_DIR), building them on first use.
func NodeBinaries() (string, error) {
	nodeBinOnce.Do(func() { nodeBinDir, nodeBinErr = runScript("node-binaries.sh") })
	return nodeBinDir, nodeBinErr
}

// imageStore is the fleet's registry and the images every node gets.
type imageStore struct {
	mu sync.Mutex
	// host is the registry's host:port (plain HTTP), set once the hub's node has its address.
	host   string
	ready  chan struct{}
	server *http.Server
	// pauseTar is the sandbox image every node imports at start.
	pauseOnce sync.Once
	pauseTar  string
	pauseErr  error
	// dnsTar and dnsRef are the cluster DNS image every node imports.
	dnsOnce        sync.Once
	dnsTar, dnsRef string
	dnsErr         error
}

// nodePlanes returns the control planes with a node, including those that failed to start
// after their node was made (their node must be stopped all the same). cp.node is written
// while a control plane starts: callers run after up has returned.
func (f *Fleet) nodePlanes() []*controlPlane {
	f.begunMu.Lock()
	defer f.begunMu.Unlock()
	var out []*controlPlane
	for _, cp := range f.begun {
		if cp.node != nil {
			out = append(out, cp)
		}
	}
	return out
}

// prepareNode makes the cluster's node network (and, for the hub, starts the registry on it),
// so that the API server can listen on its host end.
func (f *Fleet) prepareNode(cp *controlPlane) (*node.Node, error) {
	n, err := node.Prepare(node.Options{
		Name:   cp.name,
		Dir:    filepath.Join(cp.dir, "node"),
		BinDir: f.opts.NodeBinDir,
		LogDir: filepath.Join(f.LogDir(), cp.name+"-node"),
	})
	if err != nil {
		if n != nil {
			err = errors.Join(err, n.Stop())
		}
		return nil, fmt.Errorf("%s: preparing its node: %w", cp.name, err)
	}
	f.logf("%s: node network ready, host address %s, node %s", cp.name, n.HostIP(), n.NodeIP())
	if cp.name == "hub" {
		if err := f.startRegistry(n.HostIP()); err != nil {
			return nil, errors.Join(err, n.Stop())
		}
	}
	return n, nil
}

// startRegistry serves an in-memory image registry on host, where every node's containerd
// may pull from over plain HTTP.
func (f *Fleet) startRegistry(host string) error {
	port, err := freePorts.next()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("image registry: %w", err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	f.images.mu.Lock()
	f.images.host, f.images.server = addr, srv
	f.images.mu.Unlock()
	close(f.imagesReady())
	f.OnStop(func() error { return srv.Close() })
	f.logf("hub: image registry at http://%s", addr)
	return nil
}

func (f *Fleet) imagesReady() chan struct{} {
	f.images.mu.Lock()
	defer f.images.mu.Unlock()
	if f.images.ready == nil {
		f.images.ready = make(chan struct{})
	}
	return f.images.ready
}

// RegistryHost is the host:port of the fleet's image registry (empty without real nodes): the
// registry part of an image that AddImage added, and a value for a chart's image registry.
func (f *Fleet) RegistryHost() string {
	f.images.mu.Lock()
	defer f.images.mu.Unlock()
	return f.images.host
}

// AddImage makes an image tarball (docker-archive, as node.WriteImage or `make image` write
// it) available to every node under the names the tarball records, which must start with
// RegistryHost (see AddImageAs).
func (f *Fleet) AddImage(ctx context.Context, tarPath string) error {
	m, err := singleImage(tarPath)
	if err != nil {
		return err
	}
	return f.AddImageAs(ctx, tarPath, m.RepoTags...)
}

// AddImageAs adds the single image of the tarball src to the fleet under every name in refs:
// pushed to the registry under each, imported into each node once and tagged there with each.
func (f *Fleet) AddImageAs(ctx context.Context, src string, refs ...string) error {
	if !f.opts.RealNodes {
		return errors.New("AddImageAs: the fleet has no real nodes")
	}
	if src == "" {
		return fmt.Errorf("adding %v: no image tarball", refs)
	}
	m, err := singleImage(src)
	if err != nil {
		return err
	}
	start := time.Now()
	img, err := tarball.ImageFromPath(src, nil)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		tag, err := name.NewTag(ref, name.Insecure)
		if err != nil {
			return err
		}
		if tag.RegistryStr() != f.RegistryHost() {
			return fmt.Errorf("image %s: its registry is not the fleet's (%s)", ref, f.RegistryHost())
		}
		if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	pushed := time.Since(start)
	imported, err := name.NewTag(m.RepoTags[0], name.Insecure)
	if err != nil {
		return err
	}
	err = f.onEveryNode(func(n *node.Node) error {
		if err := n.ImportImage(src); err != nil {
			return err
		}
		return n.TagImage(containerdName(imported), refs...)
	})
	f.logf("image %s as %d name(s): pushed in %s, imported into %d node(s) in %s", filepath.Base(src), len(refs),
		pushed.Round(10*time.Millisecond), len(f.nodePlanes()), (time.Since(start) - pushed).Round(10*time.Millisecond))
	return err
}

// containerdName is the name containerd gives an image imported under tag: Docker Hub is
// docker.io to it, where go-containerregistry says index.docker.io.
func containerdName(tag name.Tag) string {
	reg := tag.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + tag.RepositoryStr() + ":" + tag.TagStr()
}

// singleImage reads the manifest of a docker-archive tarball that holds one named image.
func singleImage(tarPath string) (tarball.Descriptor, error) {
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(tarPath) })
	if err != nil {
		return tarball.Descriptor{}, fmt.Errorf("reading %s: %w", tarPath, err)
	}
	if len(manifest) != 1 || len(manifest[0].RepoTags) == 0 {
		return tarball.Descriptor{}, fmt.Errorf("%s: want one image with a name, have %d image(s)", tarPath, len(manifest))
	}
	return manifest[0], nil
}

// onEveryNode runs do on every node at once.
func (f *Fleet) onEveryNode(do func(*node.Node) error) error {
	planes := f.nodePlanes()
	errs := make([]error, len(planes))
	var wg sync.WaitGroup
	for i, cp := range planes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := do(cp.node); err != nil {
				errs[i] = fmt.Errorf("%s: %w", cp.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// apiServerNodeArgs are the kube-apiserver flags that depend on whether the cluster has a node.
func (cp *controlPlane) apiServerNodeArgs() ([]string, error) {
	if cp.node == nil {
		// No pods run, and the ServiceAccount admission plugin would make pod creation wait for
		// the "default" service account.
		return []string{"--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount"}, nil
	}
	pki := filepath.Join(cp.dir, "pki")
	cert, key, err := cp.ca.issue(kubeletClientUser, nil, nil)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(map[string][]byte{
		filepath.Join(pki, "kubelet-client.crt"): cert,
		filepath.Join(pki, "kubelet-client.key"): key,
	}); err != nil {
		return nil, err
	}
	return []string{
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + filepath.Join(pki, "kubelet-client.crt"),
		"--kubelet-client-key=" + filepath.Join(pki, "kubelet-client.key"),
		// Never the node's name: resolving it would ask the machine's DNS.
		"--kubelet-preferred-address-types=InternalIP",
	}, nil
}

// kcmControllers: every controller but node IPAM on a cluster with a node.
func (cp *controlPlane) kcmControllers() []string {
	if cp.node == nil {
		return kcmControllers
	}
	return []string{"*", "-nodeipam"}
}

// startNode grants the API server's kubelet client its rights, starts kube-scheduler and the
// node. Ready is awaited in waitNodes.
func (f *Fleet) startNode(ctx context.Context, cp *controlPlane) error {
	c, err := cp.adminClient(f.scheme)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet:" + kubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	schedKubeconfig, _, err := cp.userKubeconfig("kube-scheduler", "system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	if _, err := f.start(ProcessSpec{
		Name: cp.name + "-kube-scheduler",
		Path: filepath.Join(f.opts.NodeBinDir, "kube-scheduler"),
		Args: []string{
			"--kubeconfig=" + schedKubeconfig,
			"--authentication-kubeconfig=" + schedKubeconfig,
			"--authorization-kubeconfig=" + schedKubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		},
	}, tierController); err != nil {
		return err
	}
	pauseTar, err := f.pauseImage()
	if err != nil {
		return err
	}
	select {
	case <-f.imagesReady():
	case <-ctx.Done():
		return ctx.Err()
	}
	err = cp.node.Start(ctx, node.Control{
		Server: cp.url, CA: cp.ca.certPEM, KubeletClientCA: cp.ca.certPEM,
		Issue: func(user string, groups ...string) ([]byte, []byte, error) {
			return cp.ca.issue(user, groups, nil)
		},
		Registries: []string{f.RegistryHost()},
	}, pauseTar)
	if err != nil {
		return fmt.Errorf("%s: starting its node: %w", cp.name, err)
	}
	return nil
}

// pauseImage builds the sandbox image once for every node of the fleet.
func (f *Fleet) pauseImage() (string, error) {
	f.images.pauseOnce.Do(func() {
		dir := filepath.Join(f.dir, "images")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.images.pauseErr = err
			return
		}
		f.images.pauseTar, f.images.pauseErr = node.BuildPauseImage(testenv.RepoRoot(), dir)
	})
	return f.images.pauseTar, f.images.pauseErr
}

// waitNodes waits until every node is Ready, then starts the cluster DNS on each.
func (f *Fleet) waitNodes(ctx context.Context) error {
	for _, cp := range f.nodePlanes() {
		c, err := cp.adminClient(f.scheme)
		if err != nil {
			return err
		}
		var last string
		if err := f.poll(ctx, cp.name+" node Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
			if err := cp.node.Err(); err != nil {
				return false, err
			}
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: cp.node.Name()}, n); err != nil {
				return false, nil
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					last = cond.Reason + ": " + cond.Message
					return cond.Status == corev1.ConditionTrue, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("%w (last: %s)", err, last)
		}
	}
	for _, cp := range f.nodePlanes() {
		if err := f.startClusterDNS(ctx, cp); err != nil {
			return fmt.Errorf("%s: cluster DNS: %w", cp.name, err)
		}
	}
	for _, cp := range f.nodePlanes() {
		c, err := cp.adminClient(f.scheme)
		if err != nil {
			return err
		}
		if err := f.poll(ctx, cp.name+" cluster DNS ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "coredns"}, d); err != nil {
				return false, nil
			}
			return d.Status.ReadyReplicas > 0, nil
		}); err != nil {
			return fmt.Errorf("%w; pods in kube-system: %s", err, podStates(ctx, c, metav1.NamespaceSystem))
		}
	}
	return nil
}

// startClusterDNS imports the CoreDNS image into the cluster's node and creates a kubeadm
// cluster's DNS add-on, which answers the cluster's names and nothing else.
func (f *Fleet) startClusterDNS(ctx context.Context, cp *controlPlane) error {
	f.images.dnsOnce.Do(func() {
		dir := filepath.Join(f.dir, "images")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.images.dnsErr = err
			return
		}
		f.images.dnsTar, f.images.dnsRef, f.images.dnsErr = node.BuildCoreDNSImage(f.opts.NodeBinDir, dir)
	})
	if f.images.dnsErr != nil {
		return f.images.dnsErr
	}
	if err := cp.node.ImportImage(f.images.dnsTar); err != nil {
		return err
	}
	c, err := cp.adminClient(f.scheme)
	if err != nil {
		return err
	}
	for _, o := range node.ClusterDNSObjects(f.images.dnsRef) {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// podStates describes the pods of a namespace for an error message.
func podStates(ctx context.Context, c client.Client, namespace string) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		st := string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				st += " " + cs.Name + ": " + cs.State.Waiting.Reason + " " + cs.State.Waiting.Message
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" {
				st += " " + string(cond.Type) + ": " + cond.Message
			}
		}
		out = append(out, p.Name+" "+st)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// stopNodes runs stop (a node's StopProcesses or Stop) on every node at once.
func (f *Fleet) stopNodes(stop func(*node.Node) error) error {
	return f.onEveryNode(func(n *node.Node) error {
		if err := stop(n); err != nil {
			return fmt.Errorf("stopping its node: %w", err)
		}
		return nil
	})
}

// NodeLeftovers lists what the fleet's nodes left on the machine after Stop.
func (f *Fleet) NodeLeftovers() []string {
	var out []string
	for _, cp := range f.nodePlanes() {
		for _, l := range cp.node.Leftovers() {
			out = append(out, cp.name+": "+l)
		}
	}
	return out
}

// NodeOf returns the real node of "hub" or a managed cluster (nil without real nodes).
func (f *Fleet) NodeOf(cluster string) *node.Node {
	cp, err := f.plane(cluster)
	if err != nil || cp == nil {
		return nil
	}
	return cp.node
}

// HostAddress is an address on this machine that every pod of the fleet reaches (the hub
// node's host end), for servers the harness runs for pods, such as a Git server: "" without
// real nodes, where loopback does.
func (f *Fleet) HostAddress() string {
	if f.hub == nil || f.hub.node == nil {
		return ""
	}
	return f.hub.node.HostIP()
}
