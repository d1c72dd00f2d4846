// Package fleet starts a real Open Cluster Management fleet on one machine: its control planes
// and OCM's components as plain local processes, and, with Options.RealNodes, a real node per
// cluster on which pods run.
//
// What runs (all on 127.0.0.1, every process on its own free ports):
//
//   - hub: etcd, kube-apiserver, kube-controller-manager (CSR signing for
//     kubernetes.io/kube-apiserver-client with the hub CA, garbage collector, namespace,
//     service-account and root-CA publisher controllers), OCM's hub CRDs (from the
//     open-cluster-management.io/api module this repository requires), namespace
//     open-cluster-management-hub, OCM's bootstrap ClusterRole, and the OCM v1.2.1 hub
//     controllers: `registration controller`, `placement controller`, `addon manager`
//     (renders AddOnTemplates into ManifestWorks, approves and signs addon CSRs);
//   - each managed cluster (default cluster1, cluster2): its own etcd, kube-apiserver,
//     kube-controller-manager and CA, the klusterlet CRDs (ClusterClaim, AppliedManifestWork),
//     namespaces open-cluster-management-agent and open-cluster-management-agent-addon, and one
//     `registration-operator agent` process (registration and work agents in one process, as a
//     Singleton klusterlet) joined through a bootstrap kubeconfig;
//   - then the fleet accepts each cluster as `clusteradm accept` does, once its agent has
//     created the ManagedCluster (its bootstrap CSRs approved, hubAcceptsClient set), and
//     labels it into the ManagedClusterSet Options.ClusterSet (default "fleet"), which is
//     bound to Options.BindingNamespace.
//
// On request, on a fleet with real nodes, Argo CD too: Fleet.StartArgoCD installs Argo CD v3.6
// on the hub or a managed cluster from the release's install.yaml (its ConfigMaps with the
// caller's settings, Secrets, RBAC with the ClusterRoleBindings' subjects in the chosen
// namespace), or uses one the components addon installed. Its components run as install.yaml's
// pods (argocd-server, argocd-redis, repo-server, application-controller, optionally the
// applicationset-controller, images behind the fleet's registry, added by AddArgoCDImages),
// and the ocm-manifestwork plugin as the repo-server's sidecar the chart's code adds.
// StartGitServerOn serves Git repositories for them to clone on an address pods reach (see
// argocd.go, argocdpods.go, git.go).
//
// Binaries come from hack/test-binaries.sh (kube-apiserver, etcd, kube-controller-manager;
// honours KUBEBUILDER_ASSETS), hack/ocm-binaries.sh (OCM; honours OCM_BINARIES_DIR) and
// hack/argocd-binaries.sh (Argo CD's install.yaml and binary, for its image; honours
// ARGOCD_BINARIES_DIR), all built from the Go module proxy once and cached under bin/.
//
// With Options.RealNodes every cluster, hub included, gets a real node (package test/node), a
// kube-scheduler, the controller manager's workload controllers and a cluster DNS, and pods
// run from images in the fleet's own registry (AddImage); see nodes.go. test/e2e and the demo
// run everything the project ships to a cluster that way. Without nodes (the
// benchmarks, the fault tests and the packages' own fleet tests) no pod runs: a Deployment on
// a managed cluster never becomes available. In both, no load balancer runs: the e2e tests and
// the demo write a LoadBalancer Service's address into its status, as a cloud's load balancer
// controller would.
//
// Identities: every OCM process runs as the ServiceAccount OCM's operators run it as
// (registration-controller-sa, placement-controller-sa, addon-manager-controller-sa on the hub;
// klusterlet-work-sa, a Singleton klusterlet's agent, on each cluster), authenticated by a
// client certificate for that ServiceAccount's user and groups, with the ServiceAccounts,
// ClusterRoles, Roles and bindings rendered from the pinned OCM module's own manifests
// (hack/ocm-binaries.sh copies them next to the binaries; ocmrbac.go renders them as the
// operators do). kube-controller-manager runs as system:kube-controller-manager with
// --use-service-account-credentials, as kubeadm runs it. Only the admin kubeconfigs, the
// person running the tests, are in system:masters; TestFleetSmoke checks it.
//
// Not running: OCM's webhook servers (registration, work, addon). Their admission checks (for
// example ManagedClusterSetBinding permission checks, ManifestWork validation, the default
// cluster-set label) are absent, and the addon CRDs serve v1alpha1 only, so nothing needs the
// v1beta1 conversion webhook. No work hub manager either (ManifestWorkReplicaSets, TTL
// garbage collection).
//
// The project's manager runs as the chart's pod on a fleet with real nodes (test/chartrender's
// Install, as `helm install`), or, for a benchmark, against the hub as another fleet process:
// Fleet.StartProcess (same log folder, stopped first), with Fleet.HubKubeconfigPath or a
// narrower identity from Fleet.HubUserKubeconfig. Its CRDs go in with Options.HubCRDPaths.
//
// Running:
//
//	go test ./test/fleet/ -run TestFleetSmoke -v          # smoke test, prints timings
//	FLEET_E2E=0 go test ./...                              # skip everything that needs a fleet
//	go test -short ./...                                   # same, plus other slow tests
//
// Logs: each run gets a directory, by default bin/fleet/<yyyymmdd-hhmmss>-<pid>/, with
// logs/<process>.log (hub-kube-apiserver, hub-registration-controller, hub-addon-manager,
// cluster1-klusterlet-agent, ...), kubeconfigs (hub/admin.kubeconfig,
// cluster1/admin.kubeconfig, ...), certificates, and a pids file. Stop sends SIGTERM to every
// process group (SIGKILL after 15 s) and removes the etcd data; logs and kubeconfigs stay.
// Child processes also die with the test binary (Pdeathsig), so a timed-out test leaves no
// strays. Remove old runs with `rm -rf bin/fleet`.
package fleet
