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
// the Argo CD components on that cluster, whatever its GitOpsCluster says; set to "Replace"
// (LabelValueReplace) it takes that cluster's existing Argo CD over, as existingArgoCD: Replace
// does for a whole GitOpsCluster.
const LabelArgoCDComponents = "argocd-agent-addon.open-cluster-management.io/argocd-components"

// LabelValueReplace is the value of LabelArgoCDComponents that chooses existingArgoCD: Replace
// for one cluster.
const LabelValueReplace = "Replace"

// AnnotationConfigCluster names, on a components AddOnTemplate of one cluster's own Argo CD
// configuration, the cluster it is for (the template's name holds only a hash of it).
const AnnotationConfigCluster = "argocd-agent-addon.open-cluster-management.io/cluster"

// LabelMirrorsOf marks an AddOnDeploymentConfig that carries a GitOpsCluster's config with the
// images moved to a cluster's image mirrors; its value is the hash part of the name of the
// config it was made from.
const LabelMirrorsOf = "argocd-agent-addon.open-cluster-management.io/mirrors-of"

// AnnotationUserIDs on a components AddOnTemplate says, with the value Assigned, that its pods
// name no UID, GID or fsGroup (userIDs: Auto, for a cluster that reports OpenShift).
const AnnotationUserIDs = "argocd-agent-addon.open-cluster-management.io/user-ids"

// Keys of the hub objects the GitOpsCluster reconciler writes: the principal's PKI secrets and
// Deployment, and the agents' Argo CD cluster secrets (the last three are Argo CD's and
// argocd-agent's own keys).
const (
	// AnnotationPrincipalTLSHash on the principal's pod template restarts it when its serving
	// certificate changes.
	AnnotationPrincipalTLSHash = "argocd-agent-addon.open-cluster-management.io/principal-tls-sha256"
	// AnnotationRotateJWTKeyNow on the JWT signing-key secret asks for a new key; its value is a
	// token the person picks, and each new token rotates once (recorded in
	// AnnotationJWTKeyRotatedFor, on the secret and on the principal's pod template, which
	// restarts it to load the key).
	AnnotationRotateJWTKeyNow  = "argocd-agent-addon.open-cluster-management.io/rotate-jwt-key-now"
	AnnotationJWTKeyRotatedFor = "argocd-agent-addon.open-cluster-management.io/jwt-key-rotated-for"
	// AnnotationCARotatedAt records when the CA secret last got a new CA.
	AnnotationCARotatedAt = "argocd-agent-addon.open-cluster-management.io/ca-rotated-at"
	// AnnotationRotateCANow on the CA secret asks for an emergency rotation: a new CA, and
	// every previous one dropped from the trust bundle at once. Its value is a token the
	// person picks (an incident number); each new token rotates once.
	AnnotationRotateCANow = "argocd-agent-addon.open-cluster-management.io/rotate-ca-now"
	// AnnotationCARotatedFor records the token of the last emergency rotation done.
	AnnotationCARotatedFor = "argocd-agent-addon.open-cluster-management.io/ca-rotated-for"
	// AnnotationCADistrustedAt records when an emergency rotation dropped the previous CAs.
	// While it equals AnnotationCARotatedAt (no routine rotation since), the principal's
	// serving certificate moves to the current CA without waiting for the agents.
	AnnotationCADistrustedAt = "argocd-agent-addon.open-cluster-management.io/ca-distrusted-at"
	// LabelAgentName marks an Argo CD cluster secret with the agent it maps to.
	LabelAgentName = "argocd-agent.argoproj-labs.io/agent-name"
	// LabelSecretType is Argo CD's secret-type label.
	LabelSecretType = "argocd.argoproj.io/secret-type"
	// FinalizerRecordCertificate on an agent cluster secret keeps it until the manager has
	// recorded its resource-proxy certificate in the cluster's ledger: however the secret goes
	// (a revocation, a person, a GitOpsCluster's deletion), its certificate stays revocable.
	FinalizerRecordCertificate = "argocd-agent-addon.open-cluster-management.io/record-certificate"
	// AnnotationSkipReconcile stops the hub application-controller from using the secret.
	AnnotationSkipReconcile = "argocd.argoproj.io/skip-reconcile"
)
