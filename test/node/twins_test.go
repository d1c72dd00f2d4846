package node_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// TestNodesOfOneNameSideBySide runs two nodes with the same name at once, as two fleets on one
// machine each have a "hub": each keeps its pod running. With a cgroup root named after the node
// alone, the two kubelets shared it, and each removed the other's pods as strays. The node that
// started second stops last and removes the folders the first one's kubelet made outside the
// nodes' own (it used to take them for the host's and leave them).
func TestNodesOfOneNameSideBySide(t *testing.T) {
	requireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const devicePlugins = "/var/lib/kubelet/device-plugins"
	_, err := os.Stat(devicePlugins)
	hostHadIt := err == nil
	var twins []*realCluster
	for range 2 {
		c := startRealCluster(ctx, t, "twin", 210, 219)
		twins = append(twins, c)
	}
	if a, b := twins[0].node.CgroupRoot(), twins[1].node.CgroupRoot(); a == b {
		t.Errorf("both nodes named twin have the cgroup root %s", a)
	}
	for _, c := range twins {
		c.helloImage()
		if _, err := c.cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "hello"},
			StringData: map[string]string{"token": "twin"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.poll("pod created", time.Minute, func() (bool, error) {
			_, err := c.cs.CoreV1().Pods("default").Create(ctx, helloPod("hello", "twin"), metav1.CreateOptions{})
			return err == nil, err
		})
	}
	started := map[int]string{}
	for i, c := range twins {
		p := c.waitPodReady("default", "hello", 3*time.Minute)
		started[i] = p.Status.ContainerStatuses[0].ContainerID
	}
	// Each kubelet's housekeeping runs every few seconds: a pod the other one took for a stray
	// would be killed and restarted by now.
	time.Sleep(40 * time.Second)
	for i, c := range twins {
		p, err := c.cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Status.ContainerStatuses[0]
		if st.RestartCount != 0 || st.ContainerID != started[i] || st.State.Running == nil {
			t.Errorf("twin %d (%s): its pod's container was restarted or stopped: restarts %d, %s -> %s, state %+v",
				i, c.node.CgroupRoot(), st.RestartCount, started[i], st.ContainerID, st.State)
		}
	}
	for _, c := range twins {
		c.stop()
	}
	if _, err := os.Stat(devicePlugins); !hostHadIt && !os.IsNotExist(err) && !node.NodesExist() {
		t.Errorf("%s, made by the first node's kubelet, is still there after the last node stopped (%v)", devicePlugins, err)
	}
	if t.Failed() {
		t.Logf("cgroup roots: %s", strings.Join([]string{twins[0].node.CgroupRoot(), twins[1].node.CgroupRoot()}, ", "))
	}
}
