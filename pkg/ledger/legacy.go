package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The layout before the ledger moved to the principal namespace.
const (
	// LegacyLedgerName was a cluster's ledger in the cluster's own hub namespace.
	LegacyLedgerName = "argocd-agent-issued-certificates"
	// LegacyBlocklistExpiryAnnotation held, on the blocklist, a JSON object of fingerprint ->
	// NotAfter; it could not grow past the 256 KiB annotation limit.
	LegacyBlocklistExpiryAnnotation = "argocd-agent-addon.open-cluster-management.io/blocklist-expiry"
)

// ReadLegacyLedger returns the old-layout ledger of cluster (nil when there is none) and its
// unexpired entries.
func ReadLegacyLedger(ctx context.Context, r client.Reader, cluster string, now time.Time) (*corev1.ConfigMap, Entries, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cluster, Name: LegacyLedgerName}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	return cm, ParseEntries(cm.Data, now), nil
}

// DeleteLegacyLedger deletes an old-layout ledger if it did not change since it was read.
func DeleteLegacyLedger(ctx context.Context, c client.Client, cm *corev1.ConfigMap) error {
	uid, rv := cm.UID, cm.ResourceVersion
	return client.IgnoreNotFound(c.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv}))
}

// MigrateLegacyBlocklist moves the old expiry record off the blocklist into the revocation
// record, keeping every key blocked. It returns how many entries it moved.
func (s Store) MigrateLegacyBlocklist(ctx context.Context, now time.Time) (int, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: BlocklistName}, cm); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	raw, ok := cm.Annotations[LegacyBlocklistExpiryAnnotation]
	if !ok {
		return 0, nil
	}
	var record map[string]string
	if err := json.Unmarshal([]byte(raw), &record); err != nil {
		// Unreadable: the keys stay blocked for good (as a person's keys would); only their
		// pruning is lost.
		record = nil
	}
	entries := Entries{}
	for fp, v := range record {
		if t, ok := entry(fp, v, now); ok {
			entries[fp] = t
		}
	}
	if err := s.block(ctx, "", CauseDeparted, entries, now); err != nil {
		return 0, fmt.Errorf("moving the blocklist's expiry record of %s: %w", s.Namespace, err)
	}
	// block() rewrote the blocklist without the annotation only if it had keys to add; make sure.
	return len(entries), s.updateBlocklist(ctx, nil, nil)
}
