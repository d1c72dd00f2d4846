package revocation

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// UnregisterForTest lets the package's external tests, which need a real API server, drive
// unregister with the secrets a pass read.
func UnregisterForTest(ctx context.Context, h config.Hub, store ledger.Store, secrets map[string]*corev1.Secret, cluster string, now time.Time) error {
	return unregistrar{h}.unregister(ctx, store, Records{Secrets: secrets}, cluster, now)
}
