package node

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ServiceCIDR is the Services' range of the API servers that nodes join
// (--service-cluster-ip-range): the kubernetes Service is its first address, the cluster DNS
// ClusterDNSIP.
const ServiceCIDR = "10.0.0.0/24"

// guardComment marks the node namespace's rules that keep Service traffic in the namespace.
const guardComment = "fleet: service range stays on the node"

// nodeNetworks holds every node's veth pair (10.251.<index>.0/30).
const nodeNetworks = "10.251.0.0/16"

func guardRule(chain string) []string {
	return []string{"iptables", "-A", chain, "-d", ServiceCIDR, "-m", "comment", "--comment", guardComment, "-j", "REJECT"}
}

// GuardRejected is how many packets the node's guard rules stopped: traffic to a Service
// address that no kube-proxy rule rewrote.
func (n *Node) GuardRejected() (int, error) {
	out, err := n.InNetns("iptables", "-L", "-v", "-n", "-x").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("iptables -L: %v: %s", err, out)
	}
	total := 0
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); strings.Contains(l, guardComment) && len(f) > 0 {
			var p int
			if _, err := fmt.Sscan(f[0], &p); err == nil {
				total += p
			}
		}
	}
	return total, nil
}

func hostLink(index int) string { return fmt.Sprintf("np-h%d", index) }
func nodeLink(index int) string { return fmt.Sprintf("np-e%d", index) }

// indexLock is the machine-wide lock file under which a node's index is chosen and its host
// link made.
const indexLock = "/run/fleet-node-index.lock"

func lockIndexes() (unlock func(), err error) {
	f, err := os.OpenFile(indexLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", indexLock, err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// fixedPathsRecord lists the fixed paths (fixedDirs) that were missing when a node of this
// machine started: the nodes made them, whichever stops last removes them. Read and written
// under the index lock.
const fixedPathsRecord = "/run/fleet-node-fixed-paths"

// recordFixedPaths adds the fixed paths missing now to the record.
func recordFixedPaths() error {
	made := readFixedPathsRecord()
	for _, p := range fixedDirs {
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			made[p] = true
		}
	}
	return writeFixedPathsRecord(made)
}

func readFixedPathsRecord() map[string]bool {
	made := map[string]bool{}
	b, _ := os.ReadFile(fixedPathsRecord)
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			made[l] = true
		}
	}
	return made
}

func writeFixedPathsRecord(made map[string]bool) error {
	if len(made) == 0 {
		if err := os.Remove(fixedPathsRecord); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	var b strings.Builder
	for _, p := range fixedDirs {
		if made[p] {
			b.WriteString(p + "\n")
		}
	}
	return os.WriteFile(fixedPathsRecord, []byte(b.String()), 0o644)
}

// freeIndex is the lowest index whose host link does not exist, 0 if none is free. The tests
// that choose fixed indexes use 200 and above.
func freeIndex() int {
	for i := 1; i < 200; i++ {
		if !linkExists(hostLink(i)) {
			return i
		}
	}
	return 0
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func run(name string, args ...string) error {
	if b, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

// makeNetwork creates the network namespace as a file under the node's folder (not in
// /run/netns, which `ip netns add` turns into a mount of its own) and the veth pair.
func (n *Node) makeNetwork() error {
	nsDir := filepath.Join(n.dir, "ns")
	if err := mkdirAll(nsDir); err != nil {
		return err
	}
	// A namespace file can only be bind-mounted on a mount that is not shared; a private
	// bind of the folder onto itself makes sure, whatever the machine's propagation.
	if err := unix.Mount(nsDir, nsDir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", nsDir, err)
	}
	if err := unix.Mount("", nsDir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making %s private: %w", nsDir, err)
	}
	n.netns = filepath.Join(nsDir, "net")
	if err := os.WriteFile(n.netns, nil, 0o644); err != nil {
		return err
	}
	if err := run("unshare", "--net="+n.netns, "true"); err != nil {
		return err
	}
	h, e := hostLink(n.opts.Index), nodeLink(n.opts.Index)
	in := func(args ...string) error {
		if b, err := n.InNetns(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("in the node's netns, %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(b)))
		}
		return nil
	}
	for _, step := range []func() error{
		func() error { return in("ip", "link", "set", "lo", "up") },
		func() error { return run("ip", "link", "add", h, "type", "veth", "peer", "name", e, "netns", n.netns) },
		func() error { return run("ip", "addr", "add", n.HostIP()+"/30", "dev", h) },
		func() error { return run("ip", "link", "set", h, "up") },
		func() error { return in("ip", "addr", "add", n.NodeIP()+"/30", "dev", e) },
		func() error { return in("ip", "link", "set", e, "up") },
		// The other nodes' host ends (another cluster's API server, the fleet's Git server and
		// registry) are reached through the host; no default route, so nothing else is.
		func() error { return in("ip", "route", "add", nodeNetworks, "via", n.HostIP()) },
		// A route for the Services' range, as a node's default route gives it: a connection from
		// the node itself (not a pod) is routed before kube-proxy's rules rewrite its address.
		// The host does not forward, so an address no rule rewrites goes no further.
		func() error { return in("ip", "route", "add", ServiceCIDR, "via", n.HostIP()) },
		// What kube-proxy did not rewrite to a pod stops here, whatever the host's forwarding
		// setting: a Service address is never sent to the host to be routed further.
		func() error { return in(guardRule("OUTPUT")...) },
		func() error { return in(guardRule("FORWARD")...) },
		// Forwarding only inside the namespace: the bridge routes pods' traffic out the veth.
		func() error { return in("sh", "-c", "echo 1 >/proc/sys/net/ipv4/ip_forward") },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}
