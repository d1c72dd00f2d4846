// Package principalpki keeps the PKI of an argocd-agent principal in its namespace: the CA the
// agents' client certificates chain to (self-managed or issued by cert-manager), the principal's
// and resource proxy's serving certificates, the JWT signing key, the trust rollout that lets a
// new CA reach every agent before the principal serves with it, and the principal's restart when
// what it loads at start-up changed. Every GitOpsCluster of a principal shares what is here.
package principalpki

import (
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Keeper keeps the PKI of principal namespaces.
type Keeper struct {
	config.Hub
	// JWTKeys hands out the JWT signing keys it writes, the first one made ahead of need;
	// nil makes each when it is needed.
	JWTKeys *pki.SpareKey
	// observing, when set, makes this keeper an Observer: it writes nothing.
	observing *observed
}
