package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentRevocationSpec says why an agent was revoked.
type AgentRevocationSpec struct {
	// Reason is free text kept for the people who read the revocation later (an incident
	// number, who asked). It changes nothing.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
}

// AgentRevocationStatus reports how the revocation is enforced on the principals.
type AgentRevocationStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// BlockedCertificates is the number of unexpired certificates of the cluster on the
	// blocklists of the principals that recorded them.
	// +optional
	BlockedCertificates int32 `json:"blockedCertificates,omitempty"`

	// Conditions: Enforced, True once the cluster has no cluster secret on any principal and
	// every certificate recorded for it is blocked on the principal that recorded it.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentRevocation cuts one managed cluster's argocd-agent off every principal the manager
// serves, whichever GitOpsCluster selects the cluster, for as long as the object exists. Its
// name is the ManagedCluster's name and it lives in a principal namespace; it holds on every
// principal, not only that one, so the right to create it is hub-wide in effect for the
// clusters it names. While it exists, no principal has a cluster secret for the cluster, every
// certificate issued to the cluster is on the TLS blocklist of the principal that recorded
// it, and the signer refuses the cluster's certificate requests for every principal (reason
// Revoked). Deleting it lifts this revocation for new keys only, and only once no other
// AgentRevocation names the cluster: the certificates blocked under it stay blocked until they
// expire, and the agent is re-admitted with the fresh key of its next certificate request.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="argocd-agent-addon.open-cluster-management.io/crd-revision=3"
// +kubebuilder:resource:shortName=agentrevocation;agentrev
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="the name must be a ManagedCluster name: a DNS label of at most 63 characters"
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.conditions[?(@.type=="Enforced")].status`
// +kubebuilder:printcolumn:name="Blocked",type=integer,JSONPath=`.status.blockedCertificates`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentRevocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec   AgentRevocationSpec   `json:"spec,omitempty"`
	Status AgentRevocationStatus `json:"status,omitempty"`
}

// AgentRevocationList is a list of AgentRevocations.
// +kubebuilder:object:root=true
type AgentRevocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentRevocation `json:"items"`
}

// Condition type and reasons of an AgentRevocation.
const (
	// ConditionEnforced is True when the revocation holds on every principal.
	ConditionEnforced = "Enforced"
	// ReasonRevocationEnforced: no cluster secret, every recorded certificate blocked.
	ReasonRevocationEnforced = "Enforced"
	// ReasonRevocationFailed: a write failed; the manager retries.
	ReasonRevocationFailed = "EnforcementFailed"
	// AnnotationRequestedBy on an AgentRevocation names the GitOpsCluster (namespace/name)
	// whose spec.revokedClusters asked for it.
	AnnotationRequestedBy = "argocd-agent-addon.open-cluster-management.io/requested-by"
	// FinalizerRevocationLift lets the manager lift a deleted revocation: it deletes the
	// cluster's certificate requests the signer refused, so that OCM's agent asks again with a
	// new key.
	FinalizerRevocationLift = "argocd-agent-addon.open-cluster-management.io/revocation-lift"
)
