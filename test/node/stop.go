package node

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stop removes everything the node made, whatever state it is in, and returns what it could
// not remove. The containers go first through containerd, so their shims exit and clean up
// after themselves; what is left after that is killed and unmounted.
func (n *Node) Stop() error {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return nil
	}
	n.stopped = true
	n.mu.Unlock()
	errs := []error{n.StopProcesses()}
	errs = append(errs, n.removeCgroups())
	errs = append(errs, n.unmountAll())
	errs = append(errs, n.removeNetwork())
	// A shim killed rather than told to stop leaves its socket.
	for _, p := range n.shimSockets {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, n.removeFixedPaths())
	if len(mountsUnder(n.dir)) == 0 {
		errs = append(errs, os.RemoveAll(n.dir))
	} else {
		errs = append(errs, fmt.Errorf("%s not removed: mounts remain under it", n.dir))
	}
	return errors.Join(errs...)
}

// StopProcesses stops the node's processes and containers and leaves its network, mounts and
// folders to Stop. An API server the node's kubelet talks to shuts down at once after this, and
// can still reach itself on the host end of the node's veth (see HostIP): once Stop has removed
// the network, a shutdown still under way waits a minute and more on requests to itself.
func (n *Node) StopProcesses() error {
	n.mu.Lock()
	if n.processesStopped {
		n.mu.Unlock()
		return nil
	}
	n.processesStopped = true
	procs := append([]*proc(nil), n.procs...)
	n.mu.Unlock()
	var errs []error
	var containerd *proc
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.name == "containerd" {
			containerd = p
			continue
		}
		errs = append(errs, p.stop(10*time.Second))
	}
	if containerd != nil && !containerd.isDone() {
		n.removeContainers()
	}
	n.shimSockets = n.shimSocketPaths()
	// Containers containerd could not remove, and their shims (named by the socket).
	errs = append(errs, n.killStrays())
	if containerd != nil {
		errs = append(errs, containerd.stop(10*time.Second))
	}
	errs = append(errs, n.killStrays())
	return errors.Join(errs...)
}

func (p *proc) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// removeContainers kills and deletes every task and container through containerd, so each
// shim unmounts its rootfs, removes its socket under /run/containerd and exits.
func (n *Node) removeContainers() {
	out, err := n.ctr("tasks", "ls", "-q").Output()
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = n.ctr("tasks", "delete", "--force", id).Run()
		}
	}
	out, err = n.ctr("containers", "ls", "-q").Output()
	if err == nil {
		for _, id := range strings.Fields(string(out)) {
			_ = n.ctr("containers", "delete", id).Run()
		}
	}
}

// shimSocketPaths names the sockets of the shims of the node's tasks, as containerd names
// them: the SHA-256 of <containerd address>/<namespace>/<task id>, under /run/containerd/s.
func (n *Node) shimSocketPaths() []string {
	tasks := filepath.Join(n.dir, "containerd", "state", "io.containerd.runtime.v2.task")
	var out []string
	namespaces, _ := os.ReadDir(tasks)
	for _, ns := range namespaces {
		ids, _ := os.ReadDir(filepath.Join(tasks, ns.Name()))
		for _, id := range ids {
			sum := sha256.Sum256([]byte(filepath.Join(n.ContainerdSocket(), ns.Name(), id.Name())))
			out = append(out, filepath.Join(shimSocketDir, hex.EncodeToString(sum[:])))
		}
	}
	return out
}

// nodePids lists the processes that belong to the node: in its cgroups, or naming its folder
// on their command line (containerd, the kubelet, kube-proxy, the shims by their socket).
func (n *Node) nodePids() []int {
	pids := n.cgroupPids()
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == n.dir || strings.HasPrefix(arg, n.dir+"/") || strings.Contains(arg, "="+n.dir+"/") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func (n *Node) killStrays() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var live []int
		for _, pid := range n.nodePids() {
			if alive(pid) {
				live = append(live, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of node %s still alive after SIGKILL: %v", n.opts.Name, live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive is false for a process that is gone or a zombie (which holds nothing).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts everything under the node's folder: the kubelet's volumes and its
// rshared root, containerd's rootfs, shm and pod netns mounts, the node's netns file.
func (n *Node) unmountAll() error {
	for i := 0; i < 10; i++ {
		mps := mountsUnder(n.dir)
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := unix.Unmount(mp, 0); err != nil {
				_ = unix.Unmount(mp, unix.MNT_DETACH)
			}
		}
	}
	if mps := mountsUnder(n.dir); len(mps) > 0 {
		return fmt.Errorf("mounts left under %s: %v", n.dir, mps)
	}
	return nil
}

// removeNetwork removes the host end of the veth once the namespace is gone (its unmount
// frees the namespace with the node's end, the bridge and the rules in it).
func (n *Node) removeNetwork() error {
	h := hostLink(n.opts.Index)
	deadline := time.Now().Add(10 * time.Second)
	for linkExists(h) {
		_ = run("ip", "link", "del", h)
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s still exists", h)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// removeFixedPaths removes what the kubelet and the CNI plugins write outside the node's
// folder whatever they are told: the pods' log symlinks, the device-plugin socket, the CNI
// result cache; and, once no other node exists, the folders holding them that nodes made
// (whichever node made them: the last to stop removes them).
func (n *Node) removeFixedPaths() error {
	var errs []error
	for _, l := range n.fixedPathLeftovers() {
		if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	unlock, err := lockIndexes()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer unlock()
	// Another node's containerd may still be stopping and write under /run/containerd: its
	// host link goes only after that, so while any node's link exists, that node removes them.
	if NodesExist() {
		return errors.Join(errs...)
	}
	made := readFixedPathsRecord()
	for _, d := range fixedDirs {
		if !made[d] {
			continue
		}
		if d == devicePluginsDir {
			for _, f := range deviceCheckpoints {
				_ = os.Remove(filepath.Join(d, f))
			}
		}
		// Only when empty: a file no node explains stays, and so does its folder.
		if err := os.Remove(d); err == nil || os.IsNotExist(err) {
			delete(made, d)
		}
	}
	return errors.Join(append(errs, writeFixedPathsRecord(made))...)
}

// deviceCheckpoints are the files every kubelet writes in the device-plugin folder.
var deviceCheckpoints = []string{"kubelet.sock", "kubelet_internal_checkpoint", "DEPRECATION"}

// fixedPathLeftovers lists the node's own files in the fixed paths: its pods' log links and its
// CNI results. The device-plugin socket and checkpoint are every kubelet's; the last node to
// stop removes them with their folder (removeFixedPaths).
func (n *Node) fixedPathLeftovers() []string {
	var out []string
	if entries, err := os.ReadDir(containerLogsDir); err == nil {
		for _, e := range entries {
			p := filepath.Join(containerLogsDir, e.Name())
			if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, n.podLogsDir()+"/") {
				out = append(out, p)
			}
		}
	}
	if entries, err := os.ReadDir(cniResultsDir); err == nil {
		for _, e := range entries {
			// The node's own network and containerd's loopback one (cni-loopback-<id>-lo):
			// the node's entries name its pods' netns files, which are under its folder.
			p := filepath.Join(cniResultsDir, e.Name())
			if b, err := os.ReadFile(p); strings.HasPrefix(e.Name(), n.cniNetwork()+"-") || (err == nil && strings.Contains(string(b), n.dir+"/")) {
				out = append(out, p)
			}
		}
	}
	return out
}

// NodesExist reports whether any node's host link is there, this session's or another's: the
// folders nodes share are the last one's to remove.
func NodesExist() bool {
	links, _ := filepath.Glob("/sys/class/net/np-h*")
	return len(links) > 0
}

// Leftovers lists what the node made that is still there: empty after Stop.
func (n *Node) Leftovers() []string {
	var out []string
	for _, pid := range n.nodePids() {
		if alive(pid) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
		}
	}
	for _, mp := range mountsUnder(n.dir) {
		out = append(out, "mount "+mp)
	}
	for _, d := range n.cgroupDirs() {
		out = append(out, "cgroup "+d)
	}
	if linkExists(hostLink(n.opts.Index)) {
		out = append(out, "link "+hostLink(n.opts.Index))
	}
	for _, p := range n.fixedPathLeftovers() {
		out = append(out, "file "+p)
	}
	for _, p := range append(n.shimSocketPaths(), n.shimSockets...) {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, "shim socket "+p)
		}
	}
	// The folders that hold the fixed paths are shared by the nodes of every fleet on the
	// machine and removed by the last to stop, which may be another test's: hack/leftovers.sh
	// checks them once the suite is over.
	if _, err := os.Lstat(n.dir); err == nil {
		out = append(out, "folder "+n.dir)
	}
	return out
}
