package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MulticlusterApplicationSetReport reports, for one ApplicationSet (same name and namespace),
// the sync and health of its Applications on every managed cluster they were delivered to by
// the basic pull model, the objects they deploy, and a summary. It is built from ManifestWork
// status feedback only.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=appsetreport;appsetreports
// +kubebuilder:metadata:annotations="argocd-agent-addon.open-cluster-management.io/crd-revision=3"
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.statuses.summary.clusters`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.statuses.summary.synced`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.statuses.summary.healthy`
// +kubebuilder:printcolumn:name="InProgress",type=string,JSONPath=`.statuses.summary.inProgress`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MulticlusterApplicationSetReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Statuses are the per-cluster states and their summary.
	// +optional
	Statuses AppConditions `json:"statuses,omitempty"`
}

// MulticlusterApplicationSetReportList is a list of reports.
// +kubebuilder:object:root=true
type MulticlusterApplicationSetReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MulticlusterApplicationSetReport `json:"items"`
}

// ResourceRef names an object an Application deploys.
type ResourceRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
}

// Condition is a warning or an error seen for an Application on one cluster.
type Condition struct {
	// Type is the kind of problem, e.g. SyncError or DeliveryError.
	Type string `json:"type,omitempty"`
	// Message says what went wrong.
	Message string `json:"message,omitempty"`
}

// ClusterCondition is the state of the ApplicationSet's Application on one cluster.
type ClusterCondition struct {
	// Cluster is the managed cluster's name.
	Cluster string `json:"cluster,omitempty"`
	// App is the hub Application, namespace/name.
	App string `json:"app,omitempty"`
	// SyncStatus and HealthStatus are the spoke Application's status.sync.status and
	// status.health.status.
	SyncStatus   string `json:"syncStatus,omitempty"`
	HealthStatus string `json:"healthStatus,omitempty"`
	// OperationStateStartedAt and OperationStatePhase describe its last sync operation.
	OperationStateStartedAt string `json:"operationStateStartedAt,omitempty"`
	OperationStatePhase     string `json:"operationStatePhase,omitempty"`
	// SyncRevision is the revision it compared against.
	SyncRevision string `json:"syncRevision,omitempty"`
	// Conditions are its errors and warnings.
	// +optional
	Conditions []Condition `json:"conditions,omitempty"`
}

// AppConditions are the per-cluster states of an ApplicationSet's Applications.
type AppConditions struct {
	// Resources are the distinct objects the Applications deploy, sorted, as the clusters'
	// resource reporters list them (empty on clusters without one), within a size budget.
	// +optional
	Resources []ResourceRef `json:"resources,omitempty"`
	// OmittedResources is how many objects Resources leaves out for its size budget.
	// +optional
	OmittedResources int `json:"omittedResources,omitempty"`
	// ClusterConditions has one entry per cluster, sorted by cluster name, within a size budget
	// that keeps the report far below etcd's object limit: when the ApplicationSet spans more
	// clusters than fit, the entries with a problem (not Synced, not Healthy, or with conditions)
	// are kept first.
	// +optional
	ClusterConditions []ClusterCondition `json:"clusterConditions,omitempty"`
	// OmittedClusters is how many clusters ClusterConditions leaves out for that budget; the
	// summary counts them all.
	// +optional
	OmittedClusters int `json:"omittedClusters,omitempty"`
	// Summary counts the clusters by state.
	// +optional
	Summary ReportSummary `json:"summary,omitempty"`
}

// ReportSummary counts clusters by state. The counts are decimal strings, as in the report
// existing tools read.
type ReportSummary struct {
	// Clusters is the number of clusters the ApplicationSet's Applications are delivered to.
	// +optional
	Clusters string `json:"clusters"`
	// Synced and NotSynced count Applications whose sync status is and is not Synced.
	// +optional
	Synced string `json:"synced"`
	// +optional
	NotSynced string `json:"notSynced"`
	// Healthy and NotHealthy count Applications whose health is Healthy, and neither Healthy
	// nor Progressing.
	// +optional
	Healthy string `json:"healthy"`
	// +optional
	NotHealthy string `json:"notHealthy"`
	// InProgress counts Applications that are Progressing or have a sync operation running.
	// +optional
	InProgress string `json:"inProgress"`
}
