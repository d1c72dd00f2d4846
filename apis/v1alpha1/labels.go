package v1alpha1

// Labels and annotations this project puts on the objects it creates.
const (
	// LabelOwnerNamespace and LabelOwnerName name the GitOpsCluster that created an object,
	// so that cluster-scoped objects (which cannot carry a namespaced owner reference) are found
	// and cleaned up too.
	LabelOwnerNamespace = "argocd-agent-addon.open-cluster-management.io/gitopscluster-namespace"
	LabelOwnerName      = "argocd-agent-addon.open-cluster-management.io/gitopscluster-name"
	// LabelManagedBy marks objects written by this project.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "argocd-agent-addon"
	// AnnotationApproveRevocation on a GitOpsCluster lets a revocation paused by the circuit
	// breaker proceed: its value must be the number of agents the paused pass would revoke,
	// as the RevocationPaused condition states, so an approval never covers a larger pass.
	AnnotationApproveRevocation = "argocd-agent-addon.open-cluster-management.io/approve-revocation"
	// AnnotationAllowedGitOpsClusterNamespaces on a principal namespace lists (comma separated,
	// or "*") the namespaces whose GitOpsClusters may use that principal; a GitOpsCluster in
	// the principal namespace itself always may.
	AnnotationAllowedGitOpsClusterNamespaces = "argocd-agent-addon.open-cluster-management.io/allowed-gitopscluster-namespaces"
	// Finalizer keeps a GitOpsCluster until everything it created is removed.
	Finalizer = "argocd-agent-addon.open-cluster-management.io/cleanup"
)

// LabelArgoCDComponents on a ManagedCluster set to "Existing" keeps the addon from installing
// the Argo CD components on that cluster, whatever its GitOpsCluster says.
const LabelArgoCDComponents = "argocd-agent-addon.open-cluster-management.io/argocd-components"

// AnnotationConfigCluster names, on a components AddOnTemplate of one cluster's own Argo CD
// configuration, the cluster it is for (the template's name holds only a hash of it).
const AnnotationConfigCluster = "argocd-agent-addon.open-cluster-management.io/cluster"
