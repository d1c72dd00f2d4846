// Package node runs a real node of the local fleet: a network namespace joined to the host by a
// veth pair, containerd with its own root, state and config, a kubelet and a kube-proxy, all as
// plain processes against an API server the caller runs on the host end of the veth. Pods run
// from images built on this machine (WriteImage) and imported into the node's containerd; no
// image is pulled and no address outside the namespace is used.
//
// The caller's API server needs, beyond envtest's defaults: --bind-address and
// --advertise-address on Node.HostIP (in its serving certificate), --authorization-mode=Node,RBAC,
// --enable-admission-plugins=NodeRestriction, the ServiceAccount admission plugin left on,
// --kubelet-client-certificate/-key from a CA given to Start as KubeletClientCA, and
// --kubelet-preferred-address-types=InternalIP (so that it never resolves a node's name).
//
// Everything a node makes, Stop removes: its processes and their containers, the network
// namespace with its links, bridge and rules, the cgroups under its cgroup root in every
// hierarchy, the mounts under its folder, and what the kubelet and the CNI plugins write to
// fixed paths (/var/log/containers, /var/lib/kubelet/device-plugins, /var/lib/cni). Leftovers
// lists whatever is still there.
//
// It needs root and the Debian packages hack/node-packages.sh installs; Available says what is
// missing. hack/node-binaries.sh builds the kubelet and kube-proxy.
package node
