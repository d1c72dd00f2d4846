package fleet

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The walk for the fleet's kubeconfigs stays out of the nodes' runtime folders: containerd
// removes snapshots under it while the fleet stops, and an image or a pod volume may carry a
// file named kubeconfig that no component of the fleet uses.
func TestPrivilegedKubeconfigsSkipNodeRuntime(t *testing.T) {
	dir := t.TempDir()
	authority, err := newCA(dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, user string, groups ...string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := authority.issue(user, groups, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writeKubeconfig(path, "test", "https://127.0.0.1:6443", authority.certPEM, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
	}
	write("cluster1/admin.kubeconfig", "admin", "system:masters")
	write("cluster1/klusterlet-agent.kubeconfig", "system:open-cluster-management:klusterlet")
	write("cluster1/node/kubelet/kubeconfig", "system:node:cluster1", "system:nodes")
	write("cluster1/kcm.kubeconfig", "kcm", "system:masters")
	write("cluster1/node/containerd/root/io.containerd.snapshotter.v1.overlayfs/snapshots/41/fs/etc/kubeconfig", "image", "system:masters")
	write("cluster1/node/kubelet/root/pods/uid/volumes/kubernetes.io~secret/hub/kubeconfig", "volume", "system:masters")

	f := &Fleet{dir: dir}
	ids, err := f.Identities()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for path := range ids {
		got = append(got, path)
	}
	slices.Sort(got)
	want := []string{"cluster1/admin.kubeconfig", "cluster1/kcm.kubeconfig", "cluster1/klusterlet-agent.kubeconfig", "cluster1/node/kubelet/kubeconfig"}
	if !slices.Equal(got, want) {
		t.Errorf("kubeconfigs found:\n got %v\nwant %v", got, want)
	}
	masters, err := f.PrivilegedKubeconfigs()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cluster1/kcm.kubeconfig (kcm)"}; !slices.Equal(masters, want) {
		t.Errorf("privileged kubeconfigs: got %v, want %v", masters, want)
	}

	gone := &Fleet{dir: filepath.Join(dir, "no-such-run")}
	if masters, err := gone.PrivilegedKubeconfigs(); err == nil {
		t.Errorf("a run folder that is gone: no error, privileged kubeconfigs %v", masters)
	}
}
