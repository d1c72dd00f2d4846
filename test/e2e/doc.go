// Package e2e runs argocd-agent-addon end to end on a real local Open Cluster Management fleet
// (test/fleet) whose clusters have real nodes: a hub and two managed clusters (cluster1,
// cluster2), each with its own etcd, kube-apiserver, kube-controller-manager, scheduler and a
// node (containerd, kubelet, kube-proxy, CoreDNS), OCM v1.2.1's hub controllers (registration,
// placement, addon manager) and a klusterlet agent (registration + work) per managed cluster as
// processes. The project's manager runs as the chart's pod on the hub, installed with Helm's
// SDK; every workload the project ships to a cluster runs as a pod from images built here and
// served by the fleet's registry; every assertion about an agent reads the managed cluster's
// own API server.
//
// The scenarios run on three such fleets at once, each with its own manager: TestAgentScenarios
// (the components addon, the agent's life), TestArgoCDScenarios (Argo CD's pods syncing
// Applications, ApplicationSets and cluster registrations on the hub, the config management
// plugin, the pull model through a klusterlet's outage) and TestPullModelScenarios (the pull
// model's ApplicationSet rollout, a cluster's own Argo CD left alone, the manager's pod); within a lane
// they run in the order listed there. Run one scenario with
// -run TestAgentScenarios/FleetE2E. The steps of FleetE2E run in order, each building on the
// state the previous one left:
//
//  1. the upstream README GitOpsCluster, a Placement selecting cluster1, a principal Service:
//     the agent lands on cluster1 through OCM, its client certificate is signed by this
//     project's signer, and the GitOpsCluster becomes Ready; the spec hash OCM records for
//     the agent's AddOnTemplate is addon.ConfigSpecHash's (the principal's trust rollout
//     relies on it);
//  2. the Placement grows to cluster2, then drops cluster1: agents follow, cluster1's
//     registration goes and its certificates are blocklisted;
//  3. the agents roll back to the previous argocd-agent release and are upgraded again, each
//     Progressive (maxConcurrency 1, a soak time of some seconds): the image tags change on one
//     cluster after the other, and status.agentsOnOtherVersion counts the cluster still waiting;
//  4. a client certificate is renewed by OCM, the kubelet updates the agent pod's volume, and
//     the cert-reloader sidecar restarts the agent with it;
//  5. a CSR made with cluster2's hub credentials for cluster1's identity is refused;
//  6. a revocation and its undo; 7. a paged fleet of 250 clusters never revokes a live agent;
//  8. deleting the GitOpsCluster removes what it created on the hub and on both clusters.
//
// ArgoCDApplication runs Argo CD's own repo-server and application-controller as pods on
// cluster1 and shows an Application from the fleet's Git server synced onto the cluster,
// Healthy once its pod is ready, and a second commit synced the same way;
// ArgoCDApplicationSet runs the applicationset-controller on the hub. Both stop their Argo CD
// again.
//
// What is not real, and nothing else: argocd-agent's image, whose module this machine cannot
// fetch, is replaced by a stand-in (test/node/images/argocd-agent) that reads its client
// certificate at start-up, answers its health probe and ends on SIGTERM, so the agent pod's
// readiness, its cert-reloader sidecar and the kubelet's restarts are real; no principal runs;
// and the cloud load balancer (the principal Service's status gets the ingress address a load
// balancer would write).
//
// Runs with FLEET_REAL_NODES=1 (root, hack/node-packages.sh's packages; make test sets it);
// skipped without it, with -short or with FLEET_E2E=0. Logs of every process: bin/fleet/<run>/logs/.
package e2e
