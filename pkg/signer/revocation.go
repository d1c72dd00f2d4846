package signer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
)

// BlocklistName is argocd-agent's optional ConfigMap, in the principal namespace, of client
// certificates the principal refuses: data keys are certificate fingerprints (pki.Fingerprint),
// values empty. The principal watches it live (argocd-agent main line after v0.9.0).
const BlocklistName = "argocd-agent-tls-blocklist"

// AnnotationBlocklistExpiry on the blocklist holds, as a JSON object, the NotAfter (RFC 3339)
// of every key the signer added, so that PruneBlocklist can drop a key once its certificate
// has expired and needs no blocking. Keys without an entry (added by a person) are left alone.
const AnnotationBlocklistExpiry = "argocd-agent-addon.open-cluster-management.io/blocklist-expiry"

// revokeAttempts bounds the rounds Revoke makes when new certificates are recorded for a
// cluster while it revokes.
const revokeAttempts = 5

// Revoke blocks, on the principal in principalNS, every unexpired certificate the signer issued
// to the given clusters, then deletes those clusters' ledgers: a cluster that comes back starts
// with an empty ledger, and its new certificate is not blocked. A ledger is deleted only if it
// did not change since it was read, so a certificate recorded meanwhile is never lost.
// Revoke is idempotent; on error it may be called again with the same clusters.
func Revoke(ctx context.Context, c client.Client, principalNS string, clusters []string, now time.Time) error {
	pending := sets.New(clusters...)
	pending.Delete("")
	for attempt := 1; pending.Len() > 0; attempt++ {
		type ledger struct {
			cluster string
			cm      *corev1.ConfigMap
		}
		var ledgers []ledger
		block := map[string]time.Time{}
		for _, cluster := range sets.List(pending) {
			cm, entries, err := readLedger(ctx, c, cluster, now)
			if err != nil {
				return err
			}
			if cm == nil {
				continue
			}
			ledgers = append(ledgers, ledger{cluster, cm})
			for fp, t := range entries {
				if t.After(block[fp]) {
					block[fp] = t
				}
			}
		}
		if err := updateBlocklist(ctx, c, principalNS, block, now); err != nil {
			return fmt.Errorf("adding %d certificate(s) to %s/%s: %w", len(block), principalNS, BlocklistName, err)
		}
		again := sets.New[string]()
		for _, l := range ledgers {
			uid, rv := l.cm.UID, l.cm.ResourceVersion
			err := c.Delete(ctx, l.cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			switch {
			case err == nil, apierrors.IsNotFound(err):
			case apierrors.IsConflict(err):
				again.Insert(l.cluster) // a certificate was recorded meanwhile: block it too
			default:
				return fmt.Errorf("deleting the certificate ledger of cluster %s: %w", l.cluster, err)
			}
		}
		if again.Len() > 0 && attempt >= revokeAttempts {
			return fmt.Errorf("the certificate ledgers of %v kept changing while they were revoked", sets.List(again))
		}
		pending = again
		if pending.Len() > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
	}
	return nil
}

// PruneBlocklist drops the blocklist keys the signer added whose certificates have expired at
// now. It writes only when something expired, so it is cheap to call on every reconcile.
func PruneBlocklist(ctx context.Context, c client.Client, principalNS string, now time.Time) error {
	return updateBlocklist(ctx, c, principalNS, nil, now)
}

// ClustersToRevoke drops from clusters those whose agent still legitimately talks to the
// principal in principalNS: the first live GitOpsCluster selecting them (their owner) uses that
// principal too, as when ownership passes from one GitOpsCluster to another of the same
// principal. Blocking such an agent would shut it out until OCM renews its certificate. r must
// carry fleet's field indexes (the manager's client).
func ClustersToRevoke(ctx context.Context, r client.Reader, principalNS string, clusters []string) ([]string, error) {
	var out []string
	for _, cluster := range sets.List(sets.New(clusters...)) {
		if cluster == "" {
			continue
		}
		selectors, err := fleet.SelectorsOf(ctx, r, cluster)
		if err != nil {
			return nil, err
		}
		if len(selectors) > 0 && names.PrincipalNamespace(selectors[0]) == principalNS {
			continue
		}
		out = append(out, cluster)
	}
	return out, nil
}

// BlocklistExpiry returns the expiry the signer recorded for each blocklist key it added.
func BlocklistExpiry(cm *corev1.ConfigMap) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	raw, ok := cm.Annotations[AnnotationBlocklistExpiry]
	if !ok || raw == "" {
		return out, nil
	}
	var entries map[string]string
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return out, fmt.Errorf("annotation %s is not a JSON object of RFC 3339 times: %w", AnnotationBlocklistExpiry, err)
	}
	for fp, v := range entries {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return out, fmt.Errorf("annotation %s: expiry %q of %s: %w", AnnotationBlocklistExpiry, v, fp, err)
		}
		out[fp] = t
	}
	return out, nil
}

// updateBlocklist adds the given fingerprints (with their expiry) and drops expired ones,
// writing only on a change. Keys it does not know the expiry of are kept.
func updateBlocklist(ctx context.Context, c client.Client, principalNS string, add map[string]time.Time, now time.Time) error {
	key := types.NamespacedName{Namespace: principalNS, Name: BlocklistName}
	return writeRetry(func() error {
		cm := &corev1.ConfigMap{}
		missing := false
		if err := c.Get(ctx, key, cm); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			missing = true
		}
		if missing {
			if len(add) == 0 {
				return nil
			}
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: principalNS, Name: BlocklistName, Labels: managedLabels()}}
		}
		expiry, err := BlocklistExpiry(cm)
		if err != nil {
			// Edited by hand: start the record afresh. Keys already listed stay listed, only
			// their pruning is lost.
			log.FromContext(ctx).Error(err, "ignoring the blocklist's expiry record", "configmap", key.String())
			expiry = map[string]time.Time{}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := err != nil
		for fp, t := range add {
			if !t.After(now) {
				continue
			}
			if _, listed := cm.Data[fp]; !listed {
				cm.Data[fp] = ""
				changed = true
			}
			if old, ok := expiry[fp]; !ok || t.After(old) {
				expiry[fp] = t
				changed = true
			}
		}
		for fp, t := range expiry {
			if !t.After(now) {
				delete(cm.Data, fp)
				delete(expiry, fp)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		record := make(map[string]string, len(expiry))
		for fp, t := range expiry {
			record[fp] = t.UTC().Format(time.RFC3339)
		}
		raw, err := json.Marshal(record)
		if err != nil {
			return err
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[AnnotationBlocklistExpiry] = string(raw)
		if missing {
			return c.Create(ctx, cm)
		}
		return c.Update(ctx, cm)
	})
}
