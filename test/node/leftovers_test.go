package node_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// TestLeftovers leaves behind what a real node makes, as a node that failed to stop would, and
// checks that hack/leftovers.sh reports and removes each, and leaves alone what was there when
// it listed. It is not parallel: the check stops whatever of this session appeared since then.
func TestLeftovers(t *testing.T) {
	node.RequireForTest(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "hack", "leftovers.sh"))
	if err != nil {
		t.Fatal(err)
	}

	// There before the list, so not the tests' doing: the check must not touch it.
	leftoverLink(t, "np-h218", "peer", "name", "np-e218")
	before, code := runLeftovers(t, script, "list")
	if code != 0 {
		t.Fatalf("leftovers.sh list: exit %d\n%s", code, before)
	}

	// A node's folder, its network namespace bound to a file in it as test/node makes it, and
	// a pod volume mount of its kubelet's.
	dir, err := filepath.EvalSymlinks(t.TempDir()) // mountinfo shows real paths
	if err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(dir, "node")
	nsDir := filepath.Join(nodeDir, "ns")
	netns := filepath.Join(nsDir, "net")
	leftoverDirs(t, nsDir)
	leftoverMount(t, nsDir, nsDir)
	if err := unix.Mount("", nsDir, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("making %s private: %v", nsDir, err)
	}
	if err := os.WriteFile(netns, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(netns, unix.MNT_DETACH) })
	if out, err := exec.Command("unshare", "--net="+netns, "true").CombinedOutput(); err != nil {
		t.Fatalf("unshare --net=%s: %v\n%s", netns, err, out)
	}
	volume := filepath.Join(nodeDir, "kubelet", "root", "pods", "uid", "volumes", "kubernetes.io~empty-dir", "data")
	src := filepath.Join(dir, "src")
	leftoverDirs(t, volume, src)
	leftoverMount(t, src, volume)

	// The host end of a veth whose other end is in the namespace, as a node's.
	leftoverLink(t, "np-h219", "peer", "name", "np-e219", "netns", netns)

	// A cgroup under a node's cgroup root, with a process in a session of its own, as runc
	// starts a container.
	cgroup := filepath.Join(leftoverCgroupHierarchy(t), "fleet-leftovers-test")
	leftoverDirs(t, cgroup)
	t.Cleanup(func() { _ = syscall.Rmdir(cgroup) })
	sleep := exec.Command("sleep", "600.219")
	sleep.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sleep.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sleep.Process.Kill(); <-exited })
	pid := strconv.Itoa(sleep.Process.Pid)
	if err := os.WriteFile(filepath.Join(cgroup, "cgroup.procs"), []byte(pid), 0o644); err != nil {
		t.Fatalf("moving the process into %s: %v", cgroup, err)
	}

	out, code := runLeftovers(t, script, "check", before)
	if code != 1 {
		t.Fatalf("leftovers.sh check: exit %d, want 1\n%s", code, out)
	}
	t.Logf("leftovers.sh check:\n%s", out)
	for _, want := range []string{
		"link np-h219", "cgroup " + cgroup, "process " + pid + ":",
		"network namespace " + netns, "mount " + nsDir + "\n", "mount " + volume + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the check does not report %q", want)
		}
	}
	if strings.Contains(out, "np-h218") || strings.Contains(out, "np-e218") {
		t.Errorf("the check reports a link that was there before its list")
	}
	if strings.Contains(out, "still there") {
		t.Errorf("the check could not remove everything")
	}

	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Errorf("process %s still runs", pid)
	}
	for _, l := range []string{"np-h219", "np-e219"} {
		if leftoverLinkExists(l) {
			t.Errorf("link %s still exists", l)
		}
	}
	if !leftoverLinkExists("np-h218") {
		t.Errorf("link np-h218, there before the list, was removed")
	}
	if _, err := os.Stat(cgroup); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s still exists (%v)", cgroup, err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mountinfo), " "+nodeDir+"/") {
		t.Errorf("mounts left under %s:\n%s", nodeDir, mountinfo)
	}

	if out, code := runLeftovers(t, script, "check", before); code != 0 {
		t.Errorf("a second check: exit %d, want 0\n%s", code, out)
	}
}

// leftoversOfThisTest matches the descriptions of what TestLeftovers makes: its folders (named
// after the test), links, cgroup and process.
const leftoversOfThisTest = `TestLeftovers|np-h21[89]|fleet-leftovers-test|: sleep 600\.219`

// runLeftovers runs hack/leftovers.sh and returns its output and exit code.
func runLeftovers(t *testing.T, script string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(script, args...)
	// Only this test's objects: make test runs other packages' fleets and envtests in the same
	// session meanwhile, which a check must not stop.
	cmd.Env = append(os.Environ(), "LEFTOVERS_ONLY="+leftoversOfThisTest)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s %s: %v", script, args[0], err)
	}
	return string(out), 0
}

func leftoverDirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// leftoverMount bind-mounts src on dst until the test ends, if the check has not unmounted it.
func leftoverMount(t *testing.T, src, dst string) {
	t.Helper()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s on %s: %v", src, dst, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dst, unix.MNT_DETACH) })
}

// leftoverLink adds a veth pair (this kernel may lack the dummy type) with the given peer arguments.
func leftoverLink(t *testing.T, name string, peer ...string) {
	t.Helper()
	args := append([]string{"link", "add", name, "type", "veth"}, peer...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
}

func leftoverLinkExists(name string) bool {
	_, err := os.Lstat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// leftoverCgroupHierarchy picks a hierarchy to make a cgroup in: a v1 one, or the unified one.
func leftoverCgroupHierarchy(t *testing.T) string {
	t.Helper()
	for _, h := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err == nil {
			return h
		}
	}
	t.Skip("no cgroup hierarchy under /sys/fs/cgroup")
	return ""
}
