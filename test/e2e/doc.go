// Package e2e runs argocd-agent-addon end to end on a real local Open Cluster Management fleet
// (test/fleet): a hub and two managed clusters (cluster1, cluster2), each with its own etcd,
// kube-apiserver and kube-controller-manager, OCM v1.2.1's hub controllers (registration,
// placement, addon manager) and a klusterlet agent (registration + work) per managed cluster,
// all plain local processes. The project's manager is built once and runs against the hub as
// another process; every assertion about an agent reads the managed cluster's own API server.
//
// One fleet serves the whole package (TestMain). The scenarios of TestFleetE2E run in order,
// each building on the state the previous one left:
//
//  1. the upstream README GitOpsCluster, a Placement selecting cluster1, a principal Service:
//     the agent lands on cluster1 through OCM, its client certificate is signed by this
//     project's signer, and the GitOpsCluster becomes Ready; the spec hash OCM records for
//     the agent's AddOnTemplate is addon.ConfigSpecHash's (the principal's trust rollout
//     relies on it);
//  2. the Placement grows to cluster2, then drops cluster1: agents follow, cluster1's
//     registration goes and its certificates are blocklisted;
//  3. an agent image change rolls out Progressive (maxConcurrency 1), one cluster after the other;
//  4. a client certificate is renewed by OCM and the cert-reloader restarts a stand-in agent;
//  5. a CSR made with cluster2's hub credentials for cluster1's identity is refused;
//  6. deleting the GitOpsCluster removes what it created on the hub and on both clusters.
//
// Before them, TestArgoCDApplication runs Argo CD's own repo-server and application-controller
// on cluster1 and shows an Application from a Git repository served on loopback synced onto the
// cluster, Healthy once its Deployment is available, and a second commit synced the same way;
// TestArgoCDApplicationSet runs the applicationset-controller on the hub. Both stop their Argo
// CD again.
//
// What is simulated, and nothing else: the kubelet (no pod ever runs, so Deployment
// availability is written with fleet.MarkDeploymentAvailable, and in scenario 4 the secret
// volume and container restart are done by the test), and the cloud load balancer (the principal
// Service's status gets the ingress address a load balancer would write). No argocd-agent
// principal or agent binary runs.
//
// Skipped with -short or FLEET_E2E=0. Logs of every process: bin/fleet/<run>/logs/.
package e2e
