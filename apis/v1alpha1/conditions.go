package v1alpha1

// Condition types reported on a GitOpsCluster.
const (
	ConditionPlacementResolved   = "PlacementResolved"
	ConditionPrincipalDiscovered = "PrincipalDiscovered"
	ConditionCertificatesReady   = "CertificatesReady"
	ConditionAddOnConfigured     = "AddOnConfigured"
	ConditionAgentsAvailable     = "AgentsAvailable"
	ConditionReady               = "Ready"
)

// Condition reasons.
const (
	ReasonPlacementNotFound    = "PlacementNotFound"
	ReasonPlacementResolved    = "Resolved"
	ReasonPlacementReadFailed  = "PlacementReadFailed"
	ReasonClusterConflict      = "ClusterConflict"
	ReasonInvalidClusterNames  = "InvalidClusterNames"
	ReasonPrincipalFromSpec    = "FromSpec"
	ReasonPrincipalFromService = "FromService"
	ReasonPrincipalNotFound    = "PrincipalServiceNotFound"
	ReasonPrincipalNoAddress   = "PrincipalAddressUnknown"
	ReasonCertificatesIssued   = "Issued"
	ReasonCertificatesFailed   = "IssueFailed"
	ReasonAddOnApplied         = "Applied"
	ReasonAddOnApplyFailed     = "ApplyFailed"
	ReasonAgentsAvailable      = "AllAvailable"
	ReasonAgentsUnavailable    = "SomeUnavailable"
	ReasonNoClusters           = "NoClustersSelected"
	ReasonReady                = "Ready"
	ReasonNotReady             = "NotReady"
	ReasonNamespaceNotManaged  = "NamespaceNotManaged"
)

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
	// Finalizer keeps a GitOpsCluster until everything it created is removed.
	Finalizer = "argocd-agent-addon.open-cluster-management.io/cleanup"
)
