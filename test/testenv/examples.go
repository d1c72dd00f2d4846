package testenv

// ReadmeGitOpsCluster is the GitOpsCluster of the upstream project's README, which this
// project promises to accept unchanged; the CRD tests, the e2e suite and the demo all apply it.
const ReadmeGitOpsCluster = `
apiVersion: apps.open-cluster-management.io/v1alpha1
kind: GitOpsCluster
metadata:
  name: my-gitops-cluster
  namespace: open-cluster-management
spec:
  placementRef:
    kind: Placement
    name: argocd-placement
  argoCDAgentAddon:
    mode: managed
`
