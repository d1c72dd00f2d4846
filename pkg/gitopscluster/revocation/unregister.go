package revocation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
)

// unregistrar cuts agents off their principal: it records each cluster secret's certificate,
// deletes the secret and blocks the certificates the cluster's ledger lists.
type unregistrar struct {
	config.Hub
}

// revocationBatchSize is how many clusters unregistrar.revoke unregisters and blocks together: a
// GitOpsCluster of 10,000 clusters is revoked in twenty rounds of a few writes each, so that no
// more than a batch of ledgers is held in memory at once and each batch's certificates are
// blocked soon after its agents are unregistered.
const revocationBatchSize = 500

// revoke unregisters the agents of clusters from the principal and blocks their
// certificates, revocationBatchSize clusters at a time. Each cluster secret's certificate is recorded
// in the cluster's ledger first, then the secret is deleted (argocd-agent v0.10 then closes the
// agent's connection; v0.9.0 only stops mapping the cluster), and only then are the batch's ledgers turned into blocklist entries, in
// a few writes: unregistration never waits for room in the blocklist, and a block that fails
// leaves the ledgers in place for the next pass. It returns the clusters it unregistered and
// how many certificates it blocked.
// done, when set, is called with each batch once it is through.
func (u unregistrar) revoke(ctx context.Context, store ledger.Store, rec Records, clusters []string, cause ledger.Cause, now time.Time, done func(batch []string)) ([]string, int, error) {
	var unregistered, full []string
	blocked := 0
	var errs []error
	for batch := range slices.Chunk(clusters, revocationBatchSize) {
		through, n, f, err := u.revokeBatch(ctx, store, rec, batch, cause, now)
		unregistered, full = append(unregistered, through...), append(full, f...)
		blocked += n
		if err != nil {
			errs = append(errs, err)
		}
		if done != nil {
			done(batch)
		}
	}
	// The clusters a full blocklist turned away are said in one error, not one per batch.
	if len(full) > 0 {
		errs = append(errs, fmt.Errorf("%s: %w", blockFailed, &ledger.BlocklistFullError{Clusters: full}))
	}
	return unregistered, blocked, errors.Join(errs...)
}

const blockFailed = "blocking the certificates of departed or revoked clusters (their cluster secrets are gone; the block is retried)"

// revokeBatch unregisters and blocks one batch; it returns the clusters it unregistered, how
// many certificates it blocked, and the clusters whose certificates found no room.
func (u unregistrar) revokeBatch(ctx context.Context, store ledger.Store, rec Records, clusters []string, cause ledger.Cause, now time.Time) (unregistered []string, blocked int, full []string, _ error) {
	var errs []error
	var mu sync.Mutex
	parallel.Each(u.Config.WriteConcurrency, clusters, func(c string) {
		err := u.unregister(ctx, store, rec, c, now)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		unregistered = append(unregistered, c)
	})
	store.Concurrency = u.Config.WriteConcurrency
	counts, err := store.RevokeClusters(ctx, unregistered, cause, now)
	var fullErr *ledger.BlocklistFullError
	switch {
	case errors.As(err, &fullErr):
		full = fullErr.Clusters
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: %w", blockFailed, err))
	}
	for _, n := range counts {
		blocked += n
	}
	return unregistered, blocked, full, errors.Join(errs...)
}

// unregister records the certificate of cluster's secret in its ledger and deletes the secret.
func (u unregistrar) unregister(ctx context.Context, store ledger.Store, rec Records, cluster string, now time.Time) error {
	s := rec.Secrets[cluster]
	if s == nil {
		return nil
	}
	return retireSecret(ctx, u.Client, store, cluster, ledgerOwnerOf(rec, cluster), s, now)
}

// retireSecret records the certificate of cluster's secret s in store, then deletes s as it was
// read and no other: a secret rewritten or replaced since holds a certificate the ledger has not
// seen, and deleting it would unregister an agent whose certificate nothing blocks. Such a
// secret is left for the next pass, which reads it and records its certificate first.
func retireSecret(ctx context.Context, c client.Client, store ledger.Store, cluster string, owner ledger.Owner, s *corev1.Secret, now time.Time) error {
	if cert, _ := agentsecret.Contents(s); cert.Fingerprint != "" {
		if err := store.Merge(ctx, cluster, owner, ledger.Entries{cert.Fingerprint: cert.NotAfter}, now); err != nil {
			return fmt.Errorf("recording the certificate of cluster %s's secret %s/%s: %w", cluster, s.Namespace, s.Name, err)
		}
	}
	err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("cluster %s's secret %s/%s changed after it was read; it is recorded and deleted on the next pass: %w", cluster, s.Namespace, s.Name, err)
	}
	return fmt.Errorf("deleting cluster %s's secret %s/%s: %w", cluster, s.Namespace, s.Name, err)
}

// ledgerOwnerOf is the owner a ledger written during cluster's revocation carries: the one it
// has, else none (any GitOpsCluster of the principal may then finish the revocation).
func ledgerOwnerOf(rec Records, cluster string) ledger.Owner {
	if owner, ok := rec.Ledgers[cluster]; ok {
		return owner
	}
	if s := rec.Secrets[cluster]; s != nil {
		return ledger.Owner{Namespace: s.Labels[v1alpha1.LabelOwnerNamespace], Name: s.Labels[v1alpha1.LabelOwnerName]}
	}
	return ledger.Owner{}
}

// adoptLedger relabels cluster's ledger with its new owner on the same principal.
func adoptLedger(ctx context.Context, c client.Client, principalNS, cluster string, owner *v1alpha1.GitOpsCluster) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledger.LedgerName(cluster)}, cm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cm.Labels[v1alpha1.LabelOwnerNamespace] == owner.Namespace && cm.Labels[v1alpha1.LabelOwnerName] == owner.Name {
		return nil
	}
	patch := client.MergeFromWithOptions(cm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	cm.Labels[v1alpha1.LabelOwnerNamespace] = owner.Namespace
	cm.Labels[v1alpha1.LabelOwnerName] = owner.Name
	return client.IgnoreNotFound(c.Patch(ctx, cm, patch))
}
