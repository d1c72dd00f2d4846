package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options name a node and where it keeps its files.
type Options struct {
	// Name is the node's name (a DNS label), also in its cgroup root /fleet-<Index>-<Name>.
	Name string
	// Index, 1 to 250, chooses the node's addresses and link names: 10.251.<Index>.1 (host end
	// of the veth, where the API server listens), 10.251.<Index>.2 (the node), pods in
	// 10.244.<Index>.0/24, links np-h<Index>, np-e<Index> and the bridge np-br<Index>. Nodes
	// that run at once need different indexes. 0 takes the lowest one no node on this machine
	// uses (chosen under a machine-wide lock, so fleets of parallel test packages never clash).
	Index int
	// Dir is a folder the node owns; Stop removes it.
	Dir string
	// BinDir holds kubelet and kube-proxy (hack/node-binaries.sh).
	BinDir string
	// LogDir receives the processes' logs; empty means Dir/logs, which Stop removes with Dir.
	LogDir string
}

// Control is what the node needs from the API server it joins.
type Control struct {
	// Server is the API server's URL on HostIP, e.g. https://10.251.1.1:6443.
	Server string
	// CA is the PEM certificate that signed the API server's serving certificate.
	CA []byte
	// KubeletClientCA is the PEM CA the kubelet trusts for client certificates: the one that
	// signed the API server's --kubelet-client-certificate.
	KubeletClientCA []byte
	// Issue returns a PEM client certificate and key for user in groups that the API server
	// accepts (its --client-ca-file): the kubelet's and kube-proxy's identities.
	Issue func(user string, groups ...string) (cert, key []byte, err error)
	// Registries are image registries (host:port) that containerd reaches over plain HTTP,
	// such as the fleet's own on a host address.
	Registries []string
}

// Node is one running node.
type Node struct {
	opts Options
	// dir is Options.Dir made absolute: the kubelet needs an absolute root.
	dir, logDir string
	netns       string

	mu      sync.Mutex
	procs   []*proc
	stopped bool
	// processesStopped: StopProcesses has run.
	processesStopped bool
	// shimSockets are the node's tasks' shim sockets, named while the state folder exists.
	shimSockets []string
}

// The fixed paths a kubelet or the CNI plugins write to whatever their configuration says.
const (
	kubeletDir       = "/var/lib/kubelet"
	devicePluginsDir = "/var/lib/kubelet/device-plugins"
	containerLogsDir = "/var/log/containers"
	cniDir           = "/var/lib/cni"
	cniResultsDir    = "/var/lib/cni/results"
	// The shims' sockets, named by a hash of containerd's address, namespace and task; a shim
	// removes its own when its task is deleted, the folders stay.
	shimSocketDir = "/run/containerd/s"
	containerdRun = "/run/containerd"
)

// fixedDirs are the folders above, deepest first: Stop removes those it caused once empty.
var fixedDirs = []string{devicePluginsDir, kubeletDir, containerLogsDir, cniResultsDir, cniDir, shimSocketDir, containerdRun}

// Available reports why nodes cannot run here: not root, or a package hack/node-packages.sh
// installs is missing.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (network namespaces, cgroups, mounts)")
	}
	var missing []string
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "nft", "conntrack", "ip", "nsenter", "unshare", "mount"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: run hack/node-packages.sh as root", strings.Join(missing, ", "))
	}
	if len(cgroupMounts()) == 0 {
		return errors.New("no cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	// A kubelet's cAdvisor needs inotify instances, and a fleet's processes take many.
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < minInotifyInstances {
			return fmt.Errorf("fs.inotify.max_user_instances is %d, below %d: run hack/node-packages.sh as root", n, minInotifyInstances)
		}
	}
	return nil
}

// minInotifyInstances is what hack/node-packages.sh raises fs.inotify.max_user_instances to.
const minInotifyInstances = 1024

// cniBinDir is where Debian's containernetworking-plugins are.
const cniBinDir = "/usr/lib/cni"

// Prepare makes the node's network: a network namespace (a file under Dir) and a veth pair
// whose host end has HostIP, so the caller can start an API server listening there before
// Start. Stop undoes it.
func Prepare(opts Options) (*Node, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opts.Index < 0 || opts.Index > 250 {
		return nil, fmt.Errorf("node index %d: want 1 to 250, or 0 for any free one", opts.Index)
	}
	if opts.Name == "" || opts.Dir == "" || opts.BinDir == "" {
		return nil, errors.New("node: Name, Dir and BinDir are required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	// The index is taken once the host link exists; the lock covers the choice and the link.
	unlock, err := lockIndexes()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if opts.Index == 0 {
		if opts.Index = freeIndex(); opts.Index == 0 {
			return nil, errors.New("no free node index in 1..250")
		}
	} else if linkExists(hostLink(opts.Index)) {
		return nil, fmt.Errorf("link %s exists: index %d is in use by another node", hostLink(opts.Index), opts.Index)
	}
	n := &Node{opts: opts, dir: dir, logDir: opts.LogDir}
	// The fixed folders missing now are the nodes' to remove once the last of them stops.
	if err := recordFixedPaths(); err != nil {
		return nil, err
	}
	if n.logDir == "" {
		n.logDir = filepath.Join(dir, "logs")
	}
	for _, d := range []string{dir, n.logDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := n.makeNetwork(); err != nil {
		return n, errors.Join(err, n.Stop())
	}
	return n, nil
}

// HostIP is the host end of the node's veth: the API server must listen there.
func (n *Node) HostIP() string { return fmt.Sprintf("10.251.%d.1", n.opts.Index) }

// NodeIP is the node's address inside its network namespace.
func (n *Node) NodeIP() string { return fmt.Sprintf("10.251.%d.2", n.opts.Index) }

// PodCIDR is the range the node's pods get addresses from.
func (n *Node) PodCIDR() string { return fmt.Sprintf("10.244.%d.0/24", n.opts.Index) }

// Name is the node's name.
func (n *Node) Name() string { return n.opts.Name }

// Netns is the file that holds the node's network namespace (for nsenter --net=).
func (n *Node) Netns() string { return n.netns }

// CgroupRoot is the kubelet's cgroup root, the same in every hierarchy. It carries the index,
// which no other running node has: two fleets' nodes of the same name (every fleet has a "hub")
// must not share one, or each kubelet removes the other's pods as strays.
func (n *Node) CgroupRoot() string { return fmt.Sprintf("/fleet-%d-%s", n.opts.Index, n.opts.Name) }

// ContainerdSocket is the node's containerd endpoint.
func (n *Node) ContainerdSocket() string {
	return filepath.Join(n.dir, "containerd", "containerd.sock")
}

func (n *Node) cniNetwork() string { return fmt.Sprintf("np-n%d", n.opts.Index) }
func (n *Node) podLogsDir() string { return filepath.Join(n.dir, "podlogs") }

// InNetns returns a command that runs in the node's network namespace (not `ip netns exec`,
// which remounts /sys in a new mount namespace: the kubelet would lose the cgroup mounts).
func (n *Node) InNetns(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--net=" + n.netns, "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/local/sbin:/usr/sbin:/sbin")
	return cmd
}

// Start runs containerd, imports the pause image (a tarball from BuildPauseImage), and starts
// the kubelet and kube-proxy. It returns once they run; the node registers and turns Ready
// on its own (watch the Node object).
func (n *Node) Start(ctx context.Context, c Control, pauseImageTar string) error {
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.writeConfig(c); err != nil {
		return err
	}
	ctrd, err := n.startInNetns("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd", "config.toml"))
	if err != nil {
		return err
	}
	if err := n.waitFor(ctx, ctrd, "containerd", 30*time.Second, func() bool {
		return n.ctr("version").Run() == nil
	}); err != nil {
		return err
	}
	if err := n.ImportImage(pauseImageTar); err != nil {
		return err
	}
	if _, err := n.startInNetns("kubelet", filepath.Join(n.opts.BinDir, "kubelet"),
		"--config="+filepath.Join(n.dir, "kubelet", "config.yaml"),
		"--kubeconfig="+filepath.Join(n.dir, "kubelet", "kubeconfig"),
		"--root-dir="+filepath.Join(n.dir, "kubelet", "root"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override="+n.opts.Name,
		"--node-ip="+n.NodeIP(),
		"--v=1",
	); err != nil {
		return err
	}
	if _, err := n.startInNetns("kube-proxy", filepath.Join(n.opts.BinDir, "kube-proxy"),
		"--config="+filepath.Join(n.dir, "kube-proxy", "config.yaml"), "--v=1"); err != nil {
		return err
	}
	return nil
}

// ctr returns a ctr command against the node's containerd, in the CRI's namespace.
func (n *Node) ctr(args ...string) *exec.Cmd {
	return exec.Command("ctr", append([]string{"--address", n.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...)
}

// ImportImage loads a docker-archive or OCI tarball into the node's containerd, where the
// kubelet finds it by the name the tarball records (use imagePullPolicy Never or IfNotPresent).
func (n *Node) ImportImage(tarPath string) error {
	if b, err := n.ctr("images", "import", "--snapshotter", "overlayfs", tarPath).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images import %s: %v\n%s", tarPath, err, b)
	}
	return nil
}

// TagImage gives the image src, already in the node's containerd, the further names dsts, as
// `ctr images tag` does: the kubelet finds it under each.
func (n *Node) TagImage(src string, dsts ...string) error {
	dsts = slices.DeleteFunc(slices.Clone(dsts), func(d string) bool { return d == src })
	if len(dsts) == 0 {
		return nil
	}
	if b, err := n.ctr(append([]string{"images", "tag", "--force", src}, dsts...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("ctr images tag %s: %v\n%s", src, err, b)
	}
	return nil
}

// Err names the first of the node's processes that has exited, with the end of its log.
func (n *Node) Err() error {
	n.mu.Lock()
	procs := append([]*proc(nil), n.procs...)
	n.mu.Unlock()
	for _, p := range procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) waitFor(ctx context.Context, p *proc, what string, timeout time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !ok() {
		if err := p.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// kubeconfig is a kubeconfig with the certificates inline.
func kubeconfig(server string, ca, cert, key []byte) string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fleet
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: node
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: fleet
  context: {cluster: fleet, user: node}
current-context: fleet
`, server, b64(ca), b64(cert), b64(key))
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, mode)
}
