package version

// The argocd-agent release the agents run and the Argo CD release it is built against. argocd-agent
// drives the spoke's own Argo CD through Argo CD's Go API and CRDs, so the two move together: the
// Argo CD components the addon installs on the spokes (pkg/spoke, generated from this Argo CD
// release by hack/spoke-manifests) must be the agent's pair. Change both here and regenerate.
const (
	ArgoCDAgentVersion = "v0.9.0"
	ArgoCDVersion      = "v3.4.3"
)

// DefaultAgentImage is the argocd-agent image of ArgoCDAgentVersion.
const DefaultAgentImage = "quay.io/argoprojlabs/argocd-agent:" + ArgoCDAgentVersion
