// Package clusters registers the managed clusters a Placement selects with a hub Argo CD, for the
// basic pull model: an ArgoCDClusterRegistration in the Argo CD namespace gets one Argo CD
// cluster secret per selected cluster, carrying the ManagedCluster's labels, so ApplicationSet
// cluster generators fan out by them. The hub Argo CD never connects to these clusters (the
// Applications it would target carry skip-reconcile and are delivered as ManifestWorks), so
// the secrets hold no credentials; names, labels and data follow OCM's own GitOpsCluster, so
// ApplicationSets written for it keep working.
package clusters

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/clusterlabels"
)

// Labels on the cluster secrets. The apps.open-cluster-management.io ones are those OCM's
// GitOpsCluster puts on its pull-model cluster secrets.
const (
	LabelACMCluster    = "apps.open-cluster-management.io/acm-cluster"
	LabelClusterName   = "apps.open-cluster-management.io/cluster-name"
	LabelClusterServer = "apps.open-cluster-management.io/cluster-server"
	// LabelRegistration names the ArgoCDClusterRegistration (in the secret's namespace) that
	// owns a secret.
	LabelRegistration = "argocd-agent-addon.open-cluster-management.io/registration"
	// Finalizer keeps a registration until its cluster secrets are deleted.
	Finalizer = "argocd-agent-addon.open-cluster-management.io/cluster-secrets"
)

// Condition type and reasons on an ArgoCDClusterRegistration.
const (
	ConditionReady            = "Ready"
	ReasonRegistered          = "Registered"
	ReasonPlacementNotFound   = "PlacementNotFound"
	ReasonSelectionUnknown    = "SelectionUnknown"
	ReasonNamespaceNotManaged = "NamespaceNotManaged"
	ReasonSecretConflict      = "SecretConflict"
	ReasonClustersPending     = "ClustersPending"
)

// SecretName is the cluster secret of cluster, as OCM's GitOpsCluster names it.
func SecretName(cluster string) string { return cluster + "-cluster-secret" }

// Server is the placeholder API server address of cluster. The hub Argo CD never dials it; it
// only has to be unique per cluster, as Argo CD keys clusters by server.
func Server(cluster string) string { return "https://" + serverHost(cluster) }

func serverHost(cluster string) string { return cluster + "-control-plane" }

// serverLabel is serverHost cut to a valid label value.
func serverLabel(cluster string) string {
	v := serverHost(cluster)
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	return strings.TrimRight(v, "-_.")
}

// ownLabels are the labels a cluster secret carries whatever the ManagedCluster's labels are.
func ownLabels(reg *v1alpha1.ArgoCDClusterRegistration, cluster string) map[string]string {
	l := map[string]string{
		v1alpha1.LabelManagedBy:  v1alpha1.ManagedByValue,
		LabelRegistration:        reg.Name,
		v1alpha1.LabelSecretType: "cluster",
		LabelACMCluster:          "true",
		LabelClusterServer:       serverLabel(cluster),
	}
	// A cluster name longer than a label value (DNS subdomains may be) is still in the data.
	if len(validation.IsValidLabelValue(cluster)) == 0 {
		l[LabelClusterName] = cluster
	}
	return l
}

// desiredSecret builds cluster's secret; clusterLabels are the ManagedCluster's labels.
func desiredSecret(reg *v1alpha1.ArgoCDClusterRegistration, cluster string, clusterLabels map[string]string) *corev1.Secret {
	labels, annotations, _ := clusterlabels.Apply(ownLabels(reg, cluster), nil, clusterLabels)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(cluster), Namespace: reg.Namespace, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"name":   []byte(cluster),
			"server": []byte(Server(cluster)),
		},
	}
}

// secretCurrent reports whether live carries everything desired does: its own labels, the
// copied labels and the data. Labels and annotations others added are left alone.
func secretCurrent(live, desired *corev1.Secret) bool {
	for k, v := range desired.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	for _, k := range clusterlabels.Copied(live.Annotations) {
		if _, ok := desired.Labels[k]; !ok {
			return false
		}
	}
	if live.Annotations[clusterlabels.AnnotationCopied] != desired.Annotations[clusterlabels.AnnotationCopied] {
		return false
	}
	for k, v := range desired.Data {
		if string(live.Data[k]) != string(v) {
			return false
		}
	}
	return live.Type == desired.Type
}
