package fleet

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// acceptedReason is the reason of the approval condition the fleet puts on a bootstrap CSR.
const acceptedReason = "AcceptedByFleet"

// acceptCluster is one pass of what a hub administrator's `clusteradm accept` does for a
// cluster that is joining: once its agent has created the ManagedCluster, approve the agent's
// pending bootstrap CSRs, accept the cluster and put it into the cluster set. It reports true
// when the ManagedCluster is accepted, in the set, and a CSR of the cluster is approved.
//
// The order matters: the agent stops creating its ManagedCluster as soon as its hub
// certificate is issued, so a CSR approved first can leave a cluster that never joins.
func acceptCluster(ctx context.Context, c client.Client, name, set string) (bool, error) {
	mc := &clusterv1.ManagedCluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	csrs := &certificatesv1.CertificateSigningRequestList{}
	if err := c.List(ctx, csrs, client.MatchingLabels{clusterv1.ClusterNameLabelKey: name}); err != nil {
		return false, err
	}
	approved := false
	for i := range csrs.Items {
		csr := &csrs.Items[i]
		if csr.Spec.Username != BootstrapUser || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || !requestsIdentityOf(csr, name) {
			continue
		}
		switch csrState(csr) {
		case certificatesv1.CertificateApproved:
			approved = true
		case "":
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
				Reason: acceptedReason, Message: "the fleet accepted cluster " + name, LastUpdateTime: metav1.Now(),
			})
			if err := c.SubResource("approval").Update(ctx, csr); err != nil {
				if apierrors.IsConflict(err) {
					return false, nil
				}
				return false, fmt.Errorf("approving CSR %s of cluster %s: %w", csr.Name, name, err)
			}
			approved = true
		}
	}
	if !mc.Spec.HubAcceptsClient || mc.Labels[clusterv1beta2.ClusterSetLabel] != set {
		patch := client.MergeFrom(mc.DeepCopy())
		mc.Spec.HubAcceptsClient = true
		if mc.Labels == nil {
			mc.Labels = map[string]string{}
		}
		mc.Labels[clusterv1beta2.ClusterSetLabel] = set
		if err := c.Patch(ctx, mc, patch); err != nil {
			return false, fmt.Errorf("accepting ManagedCluster %s: %w", name, err)
		}
	}
	return approved, nil
}

// requestsIdentityOf reports whether csr asks for an identity of cluster name, as OCM's hub
// checks before it approves: the organization system:open-cluster-management:<name> and a common
// name under it. The name label alone is the requester's word; the bootstrap identity is shared.
func requestsIdentityOf(csr *certificatesv1.CertificateSigningRequest, name string) bool {
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return false
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return false
	}
	group := "system:open-cluster-management:" + name
	return slices.Contains(req.Subject.Organization, group) && strings.HasPrefix(req.Subject.CommonName, group+":")
}

// csrState is Approved or Denied once a CSR is decided, else empty.
func csrState(csr *certificatesv1.CertificateSigningRequest) certificatesv1.RequestConditionType {
	for _, cond := range csr.Status.Conditions {
		if cond.Status == corev1.ConditionTrue && (cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied) {
			return cond.Type
		}
	}
	return ""
}
