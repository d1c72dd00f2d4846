package principalpki

import (
	"context"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// OCMAddonManagerUser is the identity of OCM's hub addon-manager, which signs CustomSigner
// requests itself with any signing CA it can read.
const OCMAddonManagerUser = "system:serviceaccount:open-cluster-management-hub:addon-manager-controller-sa"

// exclusiveCheckTTL bounds how often the API server is asked, per principal namespace.
const exclusiveCheckTTL = 10 * time.Minute

// CAKeySecrets are the Secrets of a principal namespace that hold the agents' CA key: the one
// the principal and the signer read, and the one cert-manager writes in cert-manager mode.
var CAKeySecrets = []string{names.CASecretName, certmanager.CAIssuedSecretName}

// SignerCheck remembers, per principal namespace, whether OCM's addon-manager may read the CA
// key, asking the API server at most once per exclusiveCheckTTL.
type SignerCheck struct {
	mu      sync.Mutex
	checked map[string]exclusiveAnswer
}

type exclusiveAnswer struct {
	readable bool
	// secret is the CA secret found readable.
	secret string
	at     time.Time
}

// CAReadableByOCM asks the API server whether OCM's addon-manager may read the hub CA in
// principalNS, and returns the secret it may read ("" if none). The template never names that
// secret, so OCM cannot sign with it today; a grant is still a standing risk (a template edited
// by hand, a future OCM that looks elsewhere) and a sign that someone followed OCM's
// documentation for its own signer. known is false when the API server could not answer.
func (s *SignerCheck) CAReadableByOCM(ctx context.Context, c client.Client, principalNS string) (secret string, known bool) {
	now := time.Now()
	s.mu.Lock()
	ans, ok := s.checked[principalNS]
	s.mu.Unlock()
	if !ok || now.Sub(ans.at) > exclusiveCheckTTL {
		ans = exclusiveAnswer{at: now}
		for _, name := range CAKeySecrets {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   OCMAddonManagerUser,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:open-cluster-management-hub", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: "get", Resource: "secrets", Namespace: principalNS, Name: name,
				},
			}}
			if err := c.Create(ctx, sar); err != nil {
				return "", false
			}
			if sar.Status.Allowed {
				ans.readable, ans.secret = true, name
				break
			}
		}
		s.mu.Lock()
		if s.checked == nil {
			s.checked = map[string]exclusiveAnswer{}
		}
		s.checked[principalNS] = ans
		s.mu.Unlock()
	}
	return ans.secret, true
}
