// Package names holds the object names and naming rules that the GitOpsCluster reconciler and
// the CSR signer must agree on. It depends on nothing of this project but the API types, so
// both may import it.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// CASecretName is the hub CA secret (kubernetes.io/tls) in the principal namespace: the
// argocd-agent principal verifies agent client certificates with it, and the signer signs them
// with it.
const CASecretName = "argocd-agent-ca"

// EventReporter is the component the hub controllers' Events name as their source.
const EventReporter = "argocd-agent-addon"

// The other secrets argocd-agent v0.9's principal reads in its namespace.
const (
	PrincipalTLSSecretName  = "argocd-agent-principal-tls"
	ResourceProxySecretName = "argocd-agent-resource-proxy-tls"
	JWTSecretName           = "argocd-agent-jwt"
	JWTSecretKey            = "jwt.key"
)

// TemplateName is the deterministic name of a GitOpsCluster's AddOnTemplate (cluster-scoped):
// "argocd-agent-<namespace>.<name>". A namespace holds no dot, so the first dot separates the
// two and no two GitOpsClusters share a name; one whose name would pass the 253 characters of
// a DNS subdomain is cut and ends in a hash of the full namespace/name instead.
func TemplateName(goc *v1alpha1.GitOpsCluster) string {
	return perGitOpsCluster(templatePrefix, goc)
}

// ComponentsTemplateName is the deterministic name of a GitOpsCluster's AddOnTemplate of the Argo
// CD components (cluster-scoped), "argocd-components-<namespace>.<name>", cut like TemplateName.
func ComponentsTemplateName(goc *v1alpha1.GitOpsCluster) string {
	return perGitOpsCluster("argocd-components-", goc)
}

// ComponentsClusterTemplateName is the name of the components AddOnTemplate that carries one
// cluster's own Argo CD configuration (spec.argoCDAgentAddon.clusterArgoCDConfig): the
// GitOpsCluster's components template name, cut to leave room, and a hash of the
// GitOpsCluster and the cluster (cluster names may hold dots, so joining them could collide).
func ComponentsClusterTemplateName(goc *v1alpha1.GitOpsCluster, cluster string) string {
	sum := sha256.Sum256([]byte(goc.Namespace + "/" + goc.Name + "/" + cluster))
	suffix := "-" + hex.EncodeToString(sum[:])[:12]
	base := ComponentsTemplateName(goc)
	if len(base)+len(suffix) > validation.DNS1123SubdomainMaxLength {
		base = strings.TrimRight(base[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	}
	return base + suffix
}

// ComponentsPlacementName is the deterministic name of the Placement (in the GitOpsCluster's
// namespace) by which the Argo CD components are installed, "argocd-components-<name>", cut
// like TemplateName.
func ComponentsPlacementName(goc *v1alpha1.GitOpsCluster) string {
	name := "argocd-components-" + goc.Name
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	return perGitOpsCluster("argocd-components-", goc)
}

func perGitOpsCluster(prefix string, goc *v1alpha1.GitOpsCluster) string {
	name := prefix + goc.Namespace + "." + goc.Name
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(goc.Namespace + "/" + goc.Name))
	suffix := "-" + hex.EncodeToString(sum[:])[:16]
	cut := strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	return cut + suffix
}

const templatePrefix = "argocd-agent-"

// PrincipalNamespace is the hub namespace of the GitOpsCluster's argocd-agent principal and its
// PKI secrets: spec.argoCDAgentAddon.principalNamespace, else the GitOpsCluster's namespace.
func PrincipalNamespace(goc *v1alpha1.GitOpsCluster) string {
	if goc.Spec.ArgoCDAgentAddon.PrincipalNamespace != "" {
		return goc.Spec.ArgoCDAgentAddon.PrincipalNamespace
	}
	return goc.Namespace
}

// ValidAgentName reports why a cluster name cannot be an argocd-agent agent name, or "". The
// principal takes the agent name from the client certificate and requires a DNS label that
// differs from its own namespace.
func ValidAgentName(cluster, principalNS string) string {
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	if cluster == principalNS {
		return "equals the principal namespace"
	}
	return ""
}

// ComponentsKey is a short digest of a GitOpsCluster's namespace/name, for the label keys and
// object names of its Argo CD components that must stay short.
func ComponentsKey(goc *v1alpha1.GitOpsCluster) string {
	sum := sha256.Sum256([]byte(goc.Namespace + "/" + goc.Name))
	return hex.EncodeToString(sum[:])[:12]
}

// ComponentsClearedLabel is the ManagedCluster label by which the manager clears a selected
// cluster for a GitOpsCluster's Argo CD components: the components' Placement selects only
// clusters carrying it.
func ComponentsClearedLabel(goc *v1alpha1.GitOpsCluster) string {
	return "argocd-agent-addon.open-cluster-management.io/components-" + ComponentsKey(goc)
}

// ProbeWorkName is the name of a GitOpsCluster's probe ManifestWork in each cluster's namespace.
func ProbeWorkName(goc *v1alpha1.GitOpsCluster) string {
	return "argocd-agent-addon-probe-" + ComponentsKey(goc)
}

// Labels OCM's registration agent puts on every addon CSR (hints set by the requester, which
// the signer cross-checks against spec.username), and the reason of the Failed condition the
// signer gives a CSR of a revoked cluster: the signer writes them, the GitOpsCluster reconciler
// reads them.
const (
	CSRClusterNameLabel = "open-cluster-management.io/cluster-name"
	CSRAddonNameLabel   = "open-cluster-management.io/addon-name"
	ReasonCSRRevoked    = "Revoked"
)

// ManagedByUs reports whether o carries this project's managed-by label.
func ManagedByUs(o metav1.Object) bool {
	return o.GetLabels()[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue
}

// ManagedLabels returns the managed-by label this project puts on what it writes.
func ManagedLabels() map[string]string {
	return map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
}

// OwnerLabels are the labels naming goc on the objects it owns, with the managed-by label.
func OwnerLabels(goc *v1alpha1.GitOpsCluster) map[string]string {
	return map[string]string{
		v1alpha1.LabelManagedBy:      v1alpha1.ManagedByValue,
		v1alpha1.LabelOwnerNamespace: goc.Namespace,
		v1alpha1.LabelOwnerName:      goc.Name,
	}
}

// HasLabels reports whether have holds every label of want with its value.
func HasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
