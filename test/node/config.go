package node

import (
	"fmt"
	"path/filepath"
)

// writeConfig writes containerd's, the CNI's, the kubelet's and kube-proxy's configuration,
// with client certificates for the kubelet (system:node:<Name>) and kube-proxy.
func (n *Node) writeConfig(c Control) error {
	d := n.dir
	ctrd := filepath.Join(d, "containerd")
	// Only the CRI's settings that differ from containerd's defaults, and every path moved
	// under the node's folder so that nodes side by side share nothing.
	containerdConfig := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  netns_mounts_under_state_dir = true
  # This machine gives no CAP_SYS_RESOURCE: lowering a score below containerd's own fails.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
`, filepath.Join(ctrd, "root"), filepath.Join(ctrd, "state"), n.ContainerdSocket(), n.ContainerdSocket()+".ttrpc",
		filepath.Join(ctrd, "opt"), PauseImage, filepath.Join(d, "runc"), cniBinDir, filepath.Join(d, "cni", "net.d"))

	// ipMasq: pods reach the API server with the node's address, so the host needs no route
	// to the pod range. The IPAM state stays in the node's folder.
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": "np-br%d", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, n.cniNetwork(), n.opts.Index, n.PodCIDR(), filepath.Join(d, "cni", "ipam"))

	// Plain-HTTP registries on this machine: each host is its own only endpoint, so a pull never
	// falls back to anywhere else.
	for _, r := range c.Registries {
		containerdConfig += fmt.Sprintf(`  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[1]q]
    endpoint = ["http://%[1]s"]
`, r)
	}

	kubelet := filepath.Join(d, "kubelet")
	kubeletConfig := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
podLogsDir: %[4]s
volumePluginDir: %[5]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[6]s}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [`+ClusterDNSIP+`]
resolvConf: ""
failSwapOn: false
makeIPTablesUtilChains: false
rotateCertificates: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
# No image garbage collection: the node's images are imported, not pulled, so one removed
# (the pause image first) never comes back, and a machine whose disk is 85%% used would lose
# them in the middle of a run.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A Secret or ConfigMap volume is brought up to date when the kubelet next syncs the pod, at
# most this long after the change (1m by default): the suite's certificate rotations wait on it.
syncFrequency: 10s
`, n.CgroupRoot(), n.ContainerdSocket(), n.NodeIP(), n.podLogsDir(), filepath.Join(kubelet, "volume-plugins"),
		filepath.Join(kubelet, "client-ca.crt"))

	proxy := filepath.Join(d, "kube-proxy")
	// conntrack all zero: kube-proxy leaves the machine-wide conntrack sysctls alone.
	proxyConfig := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %s
bindAddress: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection: {kubeconfig: %s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`, n.PodCIDR(), n.NodeIP(), n.opts.Name, filepath.Join(proxy, "kubeconfig"))

	kubeletCert, kubeletKey, err := c.Issue("system:node:"+n.opts.Name, "system:nodes")
	if err != nil {
		return fmt.Errorf("issuing the kubelet's certificate: %w", err)
	}
	proxyCert, proxyKey, err := c.Issue("system:kube-proxy")
	if err != nil {
		return fmt.Errorf("issuing kube-proxy's certificate: %w", err)
	}
	for path, data := range map[string]string{
		filepath.Join(ctrd, "config.toml"):                    containerdConfig,
		filepath.Join(d, "cni", "net.d", "10-fleet.conflist"): cni,
		filepath.Join(kubelet, "config.yaml"):                 kubeletConfig,
		filepath.Join(kubelet, "client-ca.crt"):               string(c.KubeletClientCA),
		filepath.Join(kubelet, "kubeconfig"):                  kubeconfig(c.Server, c.CA, kubeletCert, kubeletKey),
		filepath.Join(proxy, "config.yaml"):                   proxyConfig,
		filepath.Join(proxy, "kubeconfig"):                    kubeconfig(c.Server, c.CA, proxyCert, proxyKey),
	} {
		if err := writeFile(path, []byte(data), 0o600); err != nil {
			return err
		}
	}
	for _, sub := range []string{"kubelet/root", "kubelet/pki", "kubelet/volume-plugins", "podlogs", "runc", "cni/ipam"} {
		if err := mkdirAll(filepath.Join(d, sub)); err != nil {
			return err
		}
	}
	return nil
}
