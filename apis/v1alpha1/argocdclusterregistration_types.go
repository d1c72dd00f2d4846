package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ArgoCDClusterRegistrationSpec names the Placement whose clusters get an Argo CD cluster secret.
type ArgoCDClusterRegistrationSpec struct {
	// PlacementRef selects the managed clusters to register. The Placement is looked up in the
	// registration's own namespace, which is also where the cluster secrets are written: the
	// Argo CD namespace whose ApplicationSets should see the clusters.
	// +required
	PlacementRef PlacementReference `json:"placementRef"`
}

// ArgoCDClusterRegistrationStatus reports what was registered.
type ArgoCDClusterRegistrationStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// RegisteredClusters is the number of cluster secrets this registration keeps.
	// +optional
	RegisteredClusters int32 `json:"registeredClusters,omitempty"`

	// Conditions: Ready, with a reason and a message saying what to do when it is False.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ArgoCDClusterRegistration registers the managed clusters a Placement selects with the Argo CD
// of its namespace: one Argo CD cluster secret per cluster, labelled with the ManagedCluster's
// labels, so that ApplicationSet cluster generators can select clusters by them. It needs no
// argocd-agent; it serves the basic pull model, where the hub Argo CD never connects to the
// clusters itself.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="argocd-agent-addon.open-cluster-management.io/crd-revision=3"
// +kubebuilder:resource:shortName=argocdclusters
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placementRef.name`
// +kubebuilder:printcolumn:name="Registered",type=integer,JSONPath=`.status.registeredClusters`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ArgoCDClusterRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ArgoCDClusterRegistrationSpec   `json:"spec"`
	Status ArgoCDClusterRegistrationStatus `json:"status,omitempty"`
}

// ArgoCDClusterRegistrationList is a list of ArgoCDClusterRegistrations.
// +kubebuilder:object:root=true
type ArgoCDClusterRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ArgoCDClusterRegistration `json:"items"`
}
