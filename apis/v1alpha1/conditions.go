package v1alpha1

// Condition types reported on a GitOpsCluster.
const (
	ConditionPlacementResolved   = "PlacementResolved"
	ConditionPrincipalDiscovered = "PrincipalDiscovered"
	ConditionCertificatesReady   = "CertificatesReady"
	ConditionAddOnConfigured     = "AddOnConfigured"
	ConditionAgentsAvailable     = "AgentsAvailable"
	ConditionReady               = "Ready"
	// ConditionRevocationPaused is True while the circuit breaker holds back a revocation
	// that would cut more than the allowed share of the agents.
	ConditionRevocationPaused = "RevocationPaused"
	// ConditionSignerExclusive is False when OCM's addon-manager could sign with the hub CA.
	ConditionSignerExclusive = "SignerExclusive"
	// ConditionBlocklistHasRoom is False when the principal's TLS blocklist is nearly full or
	// could not take a revocation.
	ConditionBlocklistHasRoom = "BlocklistHasRoom"
	// ConditionForeignArgoCD is True when selected clusters run an Argo CD the components addon
	// did not install (and, with existingArgoCD LeaveAlone, get no components).
	ConditionForeignArgoCD = "ForeignArgoCDFound"
)

// Condition reasons.
const (
	ReasonPlacementNotFound   = "PlacementNotFound"
	ReasonPlacementResolved   = "Resolved"
	ReasonPlacementReadFailed = "PlacementReadFailed"
	ReasonClusterConflict     = "ClusterConflict"
	ReasonPlacementInUse      = "PlacementInUse"
	// ReasonApplicationMappingConflict: managed GitOpsClusters of one principal ask for
	// different applicationMapping, but the principal routes all its Applications one way.
	ReasonApplicationMappingConflict = "ApplicationMappingConflict"
	ReasonInvalidClusterNames        = "InvalidClusterNames"
	ReasonPrincipalFromSpec          = "FromSpec"
	ReasonPrincipalFromService       = "FromService"
	ReasonPrincipalNotFound          = "PrincipalServiceNotFound"
	ReasonPrincipalNoAddress         = "PrincipalAddressUnknown"
	ReasonPrincipalLastKnown         = "LastKnownEndpoint"
	ReasonCertificatesIssued         = "Issued"
	ReasonCertificatesFailed         = "IssueFailed"
	ReasonAddOnApplied               = "Applied"
	ReasonAddOnApplyFailed           = "ApplyFailed"
	ReasonAgentsAvailable            = "AllAvailable"
	ReasonAgentsUnavailable          = "SomeUnavailable"
	ReasonNoClusters                 = "NoClustersSelected"
	ReasonReady                      = "Ready"
	ReasonNotReady                   = "NotReady"
	// ReasonReconcileError (Ready False): a pass stopped on an error before it could check
	// everything; the message names the step and the error.
	ReasonReconcileError          = "ReconcileError"
	ReasonNamespaceNotManaged     = "NamespaceNotManaged"
	ReasonSelectionUnknown        = "SelectionUnknown"
	ReasonTooManyDepartures       = "TooManyDepartures"
	ReasonRevocationAllowed       = "WithinLimit"
	ReasonBlocklistWithinCapacity = "WithinCapacity"
	ReasonBlocklistNearFull       = "BlocklistNearFull"
	ReasonBlocklistFull           = "BlocklistFull"
	ReasonCAReadableByOCM         = "CAReadableByOCMAddonManager"
	ReasonCANotReadableByOCM      = "OnlyThisSigner"
	ReasonPrincipalNotAllowed     = "PrincipalNamespaceNotAllowed"
	// cert-manager PKI (spec.argoCDAgentAddon.certManager).
	ReasonCertManagerNotInstalled = "CertManagerNotInstalled"
	ReasonIssuerNotFound          = "IssuerNotFound"
	// ReasonIssuerNotAllowed: the issuer is cluster-scoped (or external) and the hub operator
	// has not allowed it for the GitOpsCluster's namespace.
	ReasonIssuerNotAllowed         = "IssuerNotAllowed"
	ReasonIssuerNotReady           = "IssuerNotReady"
	ReasonCertManagerCertNotReady  = "CertificateNotReady"
	ReasonCertManagerInvalidSecret = "IssuedSecretInvalid"
	ReasonPKIConflict              = "PKIConflict"
	// ReasonPrincipalPKIPending: the principal's PKI is kept by its elder GitOpsCluster, and
	// it has not yet written what the PKI needs now (a first CA, a renewal, a rotation).
	ReasonPrincipalPKIPending   = "PrincipalPKIPending"
	ReasonCertManagerNotAllowed = "CertManagerNotAllowed"
	ReasonIssuerNoCAAnchor      = "IssuerGivesNoCA"
	// ReasonWaitingForTrustRollout (CertificatesReady True): the principal keeps its valid
	// serving certificate until the agents have applied the trust bundle that verifies the new
	// one.
	ReasonWaitingForTrustRollout = "WaitingForTrustRollout"
	// Reasons of ConditionForeignArgoCD.
	ReasonForeignArgoCDLeftAlone = "LeftAlone"
	ReasonForeignArgoCDReplaced  = "Replaced"
	ReasonNoForeignArgoCD        = "NoneFound"
)
