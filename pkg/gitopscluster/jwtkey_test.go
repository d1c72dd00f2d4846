package gitopscluster_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// TestJWTKeyMadeBeforeItIsAsked: the manager makes the first principal's JWT signing key as it
// starts, so a new principal's first pass writes that key rather than spending tenths of a
// second of one core on an RSA key's primes before it writes any agent's cluster secret.
func TestJWTKeyMadeBeforeItIsAsked(t *testing.T) {
	const ns = "jwt-spare"
	var (
		mu sync.Mutex
		// made holds each key the manager made, and whether the test's GitOpsCluster
		// existed then.
		made        [][]byte
		afterCreate []bool
		created     bool
	)
	stopManager()
	startManagerWith(func(o *manager.Options) {
		o.Fleet.NewJWTKey = func() ([]byte, error) {
			key, err := pki.NewJWTSigningKey()
			mu.Lock()
			defer mu.Unlock()
			made, afterCreate = append(made, key), append(afterCreate, created)
			return key, err
		}
	})
	defer func() { stopManager(); startManager() }()
	eventually(t, "a key made by the manager as it starts", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(made) == 0 {
			return fmt.Errorf("no key made yet")
		}
		return nil
	})

	mu.Lock()
	created = true
	mu.Unlock()
	principalWithGitOpsCluster(t, ns, withAddress("principal.example.com"))
	key := waitSecret(t, ns, names.JWTSecretName).Data[names.JWTSecretKey]

	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(key, made[0]) {
		t.Errorf("the principal's JWT key is not the one made before its GitOpsCluster existed (%d keys made, made after it: %v)", len(made), afterCreate)
	}
	if len(made) != 1 {
		t.Errorf("%d keys made, want the one spare", len(made))
	}
}
