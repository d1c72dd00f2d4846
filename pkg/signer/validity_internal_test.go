package signer

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// TestValidityIsCappedBySigner: a GitOpsCluster admitted by a CRD without the 720h cap (one
// left from an older release) still gets certificates of at most MaxValidity; a shorter
// request wins.
func TestValidityIsCappedBySigner(t *testing.T) {
	r := &Reconciler{Config: DefaultConfig()}
	owner := &v1alpha1.GitOpsCluster{}
	owner.Spec.ArgoCDAgentAddon.ClientCertificateValidity = &metav1.Duration{Duration: 10 * 365 * 24 * time.Hour}
	csr := &certificatesv1.CertificateSigningRequest{}
	if got := r.validity(owner, csr); got != MaxValidity {
		t.Errorf("validity %s for a 10-year setting, want %s", got, MaxValidity)
	}
	short := int32(3600)
	csr.Spec.ExpirationSeconds = &short
	if got := r.validity(owner, csr); got != time.Hour {
		t.Errorf("validity %s for a 1h request, want 1h", got)
	}
}
