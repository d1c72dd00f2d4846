package gitopscluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// OCMAddonManagerUser is the identity of OCM's hub addon-manager, which signs CustomSigner
// requests itself with any signing CA it can read.
const OCMAddonManagerUser = "system:serviceaccount:open-cluster-management-hub:addon-manager-controller-sa"

// exclusiveCheckTTL bounds how often the API server is asked, per principal namespace.
const exclusiveCheckTTL = 10 * time.Minute

type exclusiveCache struct {
	mu      sync.Mutex
	checked map[string]exclusiveAnswer
}

type exclusiveAnswer struct {
	readable bool
	// secret is the CA secret found readable.
	secret string
	at     time.Time
}

// caKeySecrets are the Secrets of a principal namespace that hold the agents' CA key: the one
// the principal and the signer read, and the one cert-manager writes in cert-manager mode.
var caKeySecrets = []string{names.CASecretName, certmanager.CAIssuedSecretName}

// checkSignerExclusive asks the API server whether OCM's addon-manager may read the hub CA in
// principalNS. The template never names that secret, so OCM cannot sign with it today; a grant
// is still a standing risk (a template edited by hand, a future OCM that looks elsewhere) and
// a sign that someone followed OCM's documentation for its own signer. Reported, not fixed:
// the grant is not this project's to remove.
func (r *Reconciler) checkSignerExclusive(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, setCond func(string, bool, string, string)) {
	now := time.Now()
	r.exclusive.mu.Lock()
	ans, ok := r.exclusive.checked[principalNS]
	r.exclusive.mu.Unlock()
	if !ok || now.Sub(ans.at) > exclusiveCheckTTL {
		ans = exclusiveAnswer{at: now}
		for _, name := range caKeySecrets {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   OCMAddonManagerUser,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:open-cluster-management-hub", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: "get", Resource: "secrets", Namespace: principalNS, Name: name,
				},
			}}
			if err := r.Client.Create(ctx, sar); err != nil {
				// Unknown: keep the condition as it was.
				return
			}
			if sar.Status.Allowed {
				ans.readable, ans.secret = true, name
				break
			}
		}
		r.exclusive.mu.Lock()
		if r.exclusive.checked == nil {
			r.exclusive.checked = map[string]exclusiveAnswer{}
		}
		r.exclusive.checked[principalNS] = ans
		r.exclusive.mu.Unlock()
	}
	if ans.readable {
		msg := fmt.Sprintf("OCM's addon-manager (%s) may read the hub CA secret %s/%s; with it, OCM signs any certificate request for this addon without the checks of this project's signer. Remove that grant", OCMAddonManagerUser, principalNS, ans.secret)
		if !meta.IsStatusConditionFalse(goc.Status.Conditions, v1alpha1.ConditionSignerExclusive) {
			r.event(goc, corev1.EventTypeWarning, v1alpha1.ReasonCAReadableByOCM, "CheckSigner", msg)
		}
		setCond(v1alpha1.ConditionSignerExclusive, false, v1alpha1.ReasonCAReadableByOCM, msg)
		return
	}
	setCond(v1alpha1.ConditionSignerExclusive, true, v1alpha1.ReasonCANotReadableByOCM,
		fmt.Sprintf("only this project's signer can sign agent certificates: OCM's addon-manager cannot read %s/%s (nor cert-manager's copy %s) and the template names no readable signing CA", principalNS, names.CASecretName, certmanager.CAIssuedSecretName))
}
