// Package v1alpha1 holds the GitOpsCluster and ArgoCDClusterRegistration APIs, group
// apps.open-cluster-management.io.
// +kubebuilder:object:generate=true
// +groupName=apps.open-cluster-management.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the GitOpsCluster kind.
	GroupVersion = schema.GroupVersion{Group: "apps.open-cluster-management.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &GitOpsCluster{}, &GitOpsClusterList{})
	s.AddKnownTypes(GroupVersion, &ArgoCDClusterRegistration{}, &ArgoCDClusterRegistrationList{})
	s.AddKnownTypes(GroupVersion, &AgentRevocation{}, &AgentRevocationList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// AnnotationCRDRevision on each of this project's CRDs counts schema changes; CRDRevision is
// the revision this build needs. helm upgrade never updates CRDs, so the manager compares the
// two at start.
const (
	AnnotationCRDRevision = "argocd-agent-addon.open-cluster-management.io/crd-revision"
	CRDRevision           = 3
)
