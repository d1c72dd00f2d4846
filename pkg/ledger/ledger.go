// Package ledger keeps, per argocd-agent principal, the record of every client certificate its
// CA issued to an agent and not yet expired, and turns that record into revocations on the
// principal's TLS blocklist.
//
// Everything lives in the principal namespace, next to the CA it describes, where no managed
// cluster's identity may write:
//
//   - one ledger ConfigMap per cluster, argocd-agent-ledger-<cluster>: fingerprint -> NotAfter
//     of the certificates issued to that cluster (its agent certificates and the resource-proxy
//     client certificate of its cluster secret);
//   - the revocation record, 16 ConfigMaps argocd-agent-revoked-<0..f> sharded by the first hex
//     digit of the fingerprint: fingerprint -> "NotAfter cause cluster" of every revoked,
//     unexpired certificate. It says which blocklist keys this project added and when they may
//     go, so the blocklist itself holds nothing but argocd-agent's keys;
//   - argocd-agent's blocklist, argocd-agent-tls-blocklist: one key per blocked certificate.
//
// Writes are ordered so that a crash between two of them never leaves an issued certificate
// unrecorded or a revoked one unblocked: record before publishing, block before forgetting.
package ledger

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Object names and labels.
const (
	// LedgerPrefix + cluster is a cluster's ledger in the principal namespace.
	LedgerPrefix = "argocd-agent-ledger-"
	// RevokedPrefix + one hex digit is a shard of the revocation record.
	RevokedPrefix = "argocd-agent-revoked-"
	// BlocklistName is argocd-agent's ConfigMap of refused client certificates: keys are
	// pki.Fingerprint values, values empty. The principal watches it live (argocd-agent main
	// line after v0.9.0).
	BlocklistName = "argocd-agent-tls-blocklist"
	// LabelRecord marks the ConfigMaps of this package: "ledger" or "revoked".
	LabelRecord = "argocd-agent-addon.open-cluster-management.io/record"
	// LabelCluster names the cluster of a ledger.
	LabelCluster = "argocd-agent-addon.open-cluster-management.io/cluster"

	RecordLedger  = "ledger"
	RecordRevoked = "revoked"
)

// Cause says why a certificate was revoked.
type Cause string

const (
	// CauseDeparted: the cluster's agent left the principal (Placement change, detached
	// cluster, GitOpsCluster deleted). Its certificates stay blocked until they expire.
	CauseDeparted Cause = "departed"
	// CauseRevoked: a person revoked the cluster's agent. Lifting the revocation never
	// unblocks them: a key revoked for compromise stays revoked until its certificate expires.
	CauseRevoked Cause = "revoked"
)

// ErrTooManyCertificates is returned by Record when the cluster already holds the maximum
// number of unexpired certificates.
var ErrTooManyCertificates = errors.New("too many unexpired certificates")

var fingerprintPattern = regexp.MustCompile(`^[0-9A-F]{64}$`)

// LedgerName is the ledger of cluster.
func LedgerName(cluster string) string { return LedgerPrefix + cluster }

// ShardName is the revocation-record shard holding fingerprint fp.
func ShardName(fp string) string { return RevokedPrefix + strings.ToLower(fp[:1]) }

// ShardNames lists every shard of the revocation record.
func ShardNames() []string {
	out := make([]string, 0, 16)
	for _, d := range "0123456789abcdef" {
		out = append(out, RevokedPrefix+string(d))
	}
	return out
}

// Selector matches every ConfigMap of this package; the manager caches only those.
func Selector() client.MatchingLabels {
	return client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
}

// Store reads and writes one principal's records. Reader must read past any cache (an API
// reader): decisions taken on a stale ledger would lose certificates.
type Store struct {
	Client client.Client
	// Reader reads past any cache.
	Reader client.Reader
	// Cache, when set, is what Record reads first (see there).
	Cache client.Reader
	// Namespace is the principal namespace.
	Namespace string
	// Concurrency is how many ledgers RevokeClusters reads and deletes at a time (1 when unset).
	Concurrency int
}

// Owner names the GitOpsCluster that owned a cluster when a certificate was recorded.
type Owner = types.NamespacedName

// Entries are fingerprint -> NotAfter.
type Entries map[string]time.Time

// Record adds cert to cluster's ledger, labelled with owner, and drops expired entries. With
// maxUnexpired > 0 it refuses (ErrTooManyCertificates) a new fingerprint when the ledger
// already holds that many unexpired ones.
func (s Store) Record(ctx context.Context, cluster string, owner Owner, cert *x509.Certificate, maxUnexpired int, now time.Time) error {
	return s.RecordFingerprint(ctx, cluster, owner, pki.Fingerprint(cert), cert.NotAfter, maxUnexpired, now)
}

// RecordFingerprint is Record for a certificate known by its fingerprint and expiry.
func (s Store) RecordFingerprint(ctx context.Context, cluster string, owner Owner, fp string, expiry time.Time, maxUnexpired int, now time.Time) error {
	notAfter := expiry.UTC().Format(time.RFC3339)
	key := types.NamespacedName{Namespace: s.Namespace, Name: LedgerName(cluster)}
	// The first attempt reads the cache, when there is one: the write is conditional on the
	// version read, so a stale read only costs a retry, read live. A renewal then costs one
	// call, not two.
	reader := s.Reader
	if s.Cache != nil {
		reader = s.Cache
	}
	return writeRetry(func() error {
		cm := &corev1.ConfigMap{}
		r := reader
		reader = s.Reader
		if err := r.Get(ctx, key, cm); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: key.Name, Labels: Labels(cluster, owner)},
				Data:       map[string]string{fp: notAfter},
			}
			return s.Client.Create(ctx, cm)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := pruneEntries(cm.Data, now)
		if _, ok := cm.Data[fp]; !ok && maxUnexpired > 0 && len(cm.Data) >= maxUnexpired {
			return fmt.Errorf("%w: cluster %s holds %d (the maximum is %d)", ErrTooManyCertificates, cluster, len(cm.Data), maxUnexpired)
		}
		if cm.Data[fp] != notAfter {
			cm.Data[fp] = notAfter
			changed = true
		}
		for k, v := range Labels(cluster, owner) {
			if cm.Labels[k] != v {
				if cm.Labels == nil {
					cm.Labels = map[string]string{}
				}
				cm.Labels[k] = v
				changed = true
			}
		}
		if !changed {
			return nil
		}
		resetManagedFields(cm)
		if err := s.Client.Update(ctx, cm); apierrors.IsNotFound(err) {
			// A revocation deleted the ledger since it was read: read again and create it.
			return errLedgerGone
		} else if err != nil {
			return err
		}
		return nil
	})
}

// errLedgerGone makes writeRetry read a ledger again that was deleted under an update.
var errLedgerGone = errors.New("the ledger was deleted while it was being updated")

// errReadAgain makes writeRetry read the blocklist live when an earlier read it was given
// left nothing to write, or was of a blocklist deleted since.
var errReadAgain = errors.New("the blocklist is read again")

// Merge adds entries (already recorded elsewhere, e.g. by an older layout) to cluster's ledger.
func (s Store) Merge(ctx context.Context, cluster string, owner Owner, entries Entries, now time.Time) error {
	return s.upsert(ctx, LedgerName(cluster), Labels(cluster, owner), func(data map[string]string) bool {
		changed := pruneEntries(data, now)
		for fp, t := range entries {
			if !fingerprintPattern.MatchString(fp) || !t.After(now) {
				continue
			}
			if v := t.UTC().Format(time.RFC3339); data[fp] != v {
				data[fp] = v
				changed = true
			}
		}
		return changed
	})
}

// upsert reads the ConfigMap name (past any cache), lets mutate change its data, and creates
// or updates it when mutate reports a change and there is data to keep.
func (s Store) upsert(ctx context.Context, name string, labels map[string]string, mutate func(map[string]string) bool) error {
	key := types.NamespacedName{Namespace: s.Namespace, Name: name}
	return writeRetry(func() error {
		cm := &corev1.ConfigMap{}
		create := false
		if err := s.Reader.Get(ctx, key, cm); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			create = true
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Labels: labels}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		switch {
		case !mutate(cm.Data):
			return nil
		case create && len(cm.Data) == 0:
			return nil
		case create:
			return s.Client.Create(ctx, cm)
		}
		resetManagedFields(cm)
		return s.Client.Update(ctx, cm)
	})
}

// Read returns cluster's ledger (nil when absent) and its unexpired entries.
func (s Store) Read(ctx context.Context, cluster string, now time.Time) (*corev1.ConfigMap, Entries, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: LedgerName(cluster)}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading the certificate ledger of cluster %s in %s: %w", cluster, s.Namespace, err)
	}
	return cm, ParseEntries(cm.Data, now), nil
}

// ParseEntries returns the well-formed, unexpired entries of a ledger's data.
func ParseEntries(data map[string]string, now time.Time) Entries {
	out := Entries{}
	for fp, v := range data {
		if t, ok := entry(fp, v, now); ok {
			out[fp] = t
		}
	}
	return out
}

// ClusterOf returns the cluster a ledger ConfigMap belongs to, or "".
func ClusterOf(cm *corev1.ConfigMap) string {
	if cm.Labels[LabelRecord] != RecordLedger || !strings.HasPrefix(cm.Name, LedgerPrefix) {
		return ""
	}
	c := cm.Labels[LabelCluster]
	if LedgerName(c) != cm.Name {
		return ""
	}
	return c
}

// OwnerOf returns the GitOpsCluster recorded on a ledger.
func OwnerOf(cm *corev1.ConfigMap) Owner {
	return Owner{Namespace: cm.Labels[v1alpha1.LabelOwnerNamespace], Name: cm.Labels[v1alpha1.LabelOwnerName]}
}

// Revoke blocks every unexpired certificate in cluster's ledger, and the extra ones (known
// from elsewhere), on the principal, records why, and deletes the ledger. It returns how many
// certificates it blocked. Idempotent: on error it may simply be called again.
func (s Store) Revoke(ctx context.Context, cluster string, cause Cause, extra Entries, now time.Time) (int, error) {
	if len(extra) > 0 {
		if err := s.block(ctx, cause, map[string]Entries{cluster: extra}, now, nil); err != nil {
			return 0, err
		}
	}
	n, err := s.RevokeClusters(ctx, []string{cluster}, cause, now)
	return n[cluster] + len(extra), err
}

// RevokeClusters blocks every unexpired certificate in the ledgers of clusters on the
// principal, records why, and deletes the ledgers: one write per revocation-record shard and
// one blocklist write for all of them, so that a GitOpsCluster of thousands of clusters is
// revoked in a few writes. A ledger is deleted only if it did not change since it was read, so
// a certificate recorded meanwhile is blocked in the next round. Clusters whose certificates
// do not fit in the blocklist (BlocklistBudget) keep their ledger and are reported with
// ErrBlocklistFull; the others are revoked. It returns how many certificates it blocked per
// cluster. Idempotent: on error it may simply be called again.
func (s Store) RevokeClusters(ctx context.Context, clusters []string, cause Cause, now time.Time) (map[string]int, error) {
	blocked := map[string]int{}
	pending := slices.Clone(clusters)
	sort.Strings(pending)
	var full []string
	for attempt := 1; len(pending) > 0; attempt++ {
		ledgers := map[string]*corev1.ConfigMap{}
		entries := map[string]Entries{}
		var mu sync.Mutex
		var readErr error
		parallel.Each(s.Concurrency, pending, func(c string) {
			cm, e, err := s.Read(ctx, c, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				readErr = err
			} else if cm != nil {
				ledgers[c], entries[c] = cm, e
			}
		})
		if readErr != nil {
			return blocked, readErr
		}
		if len(ledgers) == 0 {
			break
		}
		fits, rejected, blocklist, err := s.fitting(ctx, sortedKeys(entries), entries)
		if err != nil {
			return blocked, err
		}
		full = append(full, rejected...)
		accepted := make(map[string]Entries, len(fits))
		for _, c := range fits {
			accepted[c] = entries[c]
		}
		// The blocklist fitting read is the block's first base: one read of it per batch,
		// where a blocklist near its budget is more than a megabyte to fetch and decode.
		if err := s.block(ctx, cause, accepted, now, blocklist); err != nil {
			return blocked, err
		}
		pending = pending[:0]
		var deleteErr error
		parallel.Each(s.Concurrency, fits, func(c string) {
			cm := ledgers[c]
			uid, rv := cm.UID, cm.ResourceVersion
			err := s.Client.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			mu.Lock()
			defer mu.Unlock()
			blocked[c] += len(entries[c])
			switch {
			case err == nil, apierrors.IsNotFound(err):
			case apierrors.IsConflict(err) && attempt < 10:
				// A certificate was recorded meanwhile: block it too.
				pending = append(pending, c)
			default:
				deleteErr = fmt.Errorf("deleting the certificate ledger of cluster %s: %w", c, err)
			}
		})
		if deleteErr != nil {
			return blocked, deleteErr
		}
	}
	if len(full) > 0 {
		return blocked, &BlocklistFullError{Clusters: full}
	}
	return blocked, nil
}

// BlocklistFullError names the clusters whose certificates did not fit in the blocklist; it
// is ErrBlocklistFull.
type BlocklistFullError struct {
	Clusters []string
}

func (e *BlocklistFullError) Error() string {
	return fmt.Sprintf("%v: the certificates of %d cluster(s) (%s) could not be blocked; their ledgers are kept for a later pass",
		ErrBlocklistFull, len(e.Clusters), strings.Join(e.Clusters[:min(len(e.Clusters), 5)], ", "))
}

func (e *BlocklistFullError) Is(target error) bool { return target == ErrBlocklistFull }

// fitting splits clusters into those whose new blocklist keys fit in the blocklist's budget,
// taken in order, and those that do not. It returns the blocklist it read live (nil when there
// is none yet).
func (s Store) fitting(ctx context.Context, clusters []string, entries map[string]Entries) (fits, rejected []string, blocklist *corev1.ConfigMap, err error) {
	blocklist, err = s.readBlocklist(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var current map[string]string
	if blocklist != nil {
		current = blocklist.Data
	}
	used := BlocklistBytes(current)
	for _, c := range clusters {
		cost := 0
		for fp := range entries[c] {
			if _, ok := current[fp]; !ok {
				cost += blocklistKeyBytes(fp)
			}
		}
		if used+cost > BlocklistBudget {
			rejected = append(rejected, c)
			continue
		}
		used += cost
		fits = append(fits, c)
	}
	return fits, rejected, blocklist, nil
}

// BlocklistBudget is how many bytes of keys and values the blocklist may hold: under etcd's
// default request limit (1.5 MiB) with room for its metadata and one update's managed fields.
// With the managed fields reset at every write, a key costs about 70 bytes: some 17,000 keys.
const BlocklistBudget = 1_200_000

// ErrBlocklistFull is returned when certificates do not fit in the principal's blocklist.
var ErrBlocklistFull = errors.New("the principal's blocklist is full")

// BlocklistBytes is the size of a blocklist's data as BlocklistBudget counts it.
func BlocklistBytes(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += blocklistKeyBytes(k) + len(v)
	}
	return n
}

// blocklistKeyBytes is a key's share of the stored ConfigMap: the key and the encoding around it.
func blocklistKeyBytes(fp string) int { return len(fp) + 6 }

// block writes entries (by cluster) to the revocation record first and to the blocklist
// second, so that a blocklist key of ours always has a record saying when it may go.
func (s Store) block(ctx context.Context, cause Cause, byCluster map[string]Entries, now time.Time, blocklist *corev1.ConfigMap) error {
	byShard := map[string]map[string]string{}
	var keys []string
	for cluster, entries := range byCluster {
		for fp, t := range entries {
			if !t.After(now) {
				continue
			}
			sh := ShardName(fp)
			if byShard[sh] == nil {
				byShard[sh] = map[string]string{}
			}
			byShard[sh][fp] = revokedValue(t, cause, cluster)
			keys = append(keys, fp)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	for _, sh := range sortedKeys(byShard) {
		add := byShard[sh]
		if err := s.updateShard(ctx, sh, func(data map[string]string) bool {
			changed := false
			for fp, v := range add {
				if old, ok := data[fp]; ok {
					// Keep a person's revocation when the same certificate also departs.
					if _, oldCause, _, ok := parseRevoked(old); ok && oldCause == CauseRevoked {
						continue
					}
				}
				if data[fp] != v {
					data[fp] = v
					changed = true
				}
			}
			return changed
		}); err != nil {
			return err
		}
	}
	_, err := s.updateBlocklist(ctx, keys, nil, blocklist)
	return err
}

// Reassert puts recorded revocations back on the blocklist (keys removed by hand, or lost to a
// crash between the record and the blocklist writes). It reads the blocklist live and returns
// how many keys were missing there.
func (s Store) Reassert(ctx context.Context, fps []string) (int, error) {
	return s.updateBlocklist(ctx, fps, nil, nil)
}

// Prune drops revoked certificates that have expired at now: from the blocklist first, then
// from the record. It writes only when something expired. An entry that does not parse is
// never read as expired: its key stays blocked, as a person's keys do.
func (s Store) Prune(ctx context.Context, now time.Time) error {
	var expired []string
	for _, sh := range ShardNames() {
		cm := &corev1.ConfigMap{}
		if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: sh}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		for fp, v := range cm.Data {
			if t, _, _, ok := parseRevoked(v); ok && !t.After(now) {
				expired = append(expired, fp)
			}
		}
	}
	if len(expired) == 0 {
		return nil
	}
	if _, err := s.updateBlocklist(ctx, nil, expired, nil); err != nil {
		return err
	}
	return s.forget(ctx, expired)
}

// OnRecord reports whether fingerprint fp is on the revocation record, read through Cache
// when it is set: a record write the cache has yet to show reads as absent, the safe side
// for a caller that would otherwise record the certificate again.
func (s Store) OnRecord(ctx context.Context, fp string) (bool, error) {
	if !ValidFingerprint(fp) {
		return false, nil
	}
	reader := s.Reader
	if s.Cache != nil {
		reader = s.Cache
	}
	shard := &corev1.ConfigMap{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ShardName(fp)}, shard); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, ok := shard.Data[fp]
	return ok, nil
}

// RevokedCert is one entry of the revocation record.
type RevokedCert struct {
	NotAfter time.Time
	Cause    Cause
	Cluster  string
}

// Revoked returns the unexpired entries of the revocation record.
func (s Store) Revoked(ctx context.Context, now time.Time) (map[string]RevokedCert, error) {
	out := map[string]RevokedCert{}
	for _, sh := range ShardNames() {
		cm := &corev1.ConfigMap{}
		if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: sh}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		for fp, v := range cm.Data {
			if t, cause, cluster, ok := parseRevoked(v); ok && t.After(now) {
				out[fp] = RevokedCert{NotAfter: t, Cause: cause, Cluster: cluster}
			}
		}
	}
	return out, nil
}

// forget removes fingerprints from the revocation record.
func (s Store) forget(ctx context.Context, fps []string) error {
	byShard := map[string][]string{}
	for _, fp := range fps {
		if len(fp) > 0 {
			byShard[ShardName(fp)] = append(byShard[ShardName(fp)], fp)
		}
	}
	for _, sh := range sortedKeys(byShard) {
		drop := byShard[sh]
		if err := s.updateShard(ctx, sh, func(data map[string]string) bool {
			changed := false
			for _, fp := range drop {
				if _, ok := data[fp]; ok {
					delete(data, fp)
					changed = true
				}
			}
			return changed
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s Store) updateShard(ctx context.Context, name string, mutate func(map[string]string) bool) error {
	return s.upsert(ctx, name, recordLabels(RecordRevoked), mutate)
}

// blocklistChunk is the most keys one blocklist write adds. The API server records the keys a
// write adds in the object's managed fields (about as many bytes again), so adding them in
// chunks keeps a full blocklist under etcd's object size limit.
const blocklistChunk = 2000

// updateBlocklist adds and removes keys, writing only on a change, in writes of at most
// blocklistChunk added keys. It returns how many keys it added. Keys a person added are never
// touched unless asked for by fingerprint. A non-nil base is a live read of the blocklist that
// the first write starts from instead of reading it again; the write is conditional on base's
// version, so a base changed since is read again. base is changed in place.
func (s Store) updateBlocklist(ctx context.Context, add, remove []string, base *corev1.ConfigMap) (int, error) {
	added := 0
	for first := true; first || len(add) > 0; first = false {
		chunk := add[:min(len(add), blocklistChunk)]
		add = add[len(chunk):]
		n, err := s.updateBlocklistOnce(ctx, chunk, remove, base)
		added += n
		if err != nil {
			return added, err
		}
		remove, base = nil, nil
	}
	return added, nil
}

func (s Store) updateBlocklistOnce(ctx context.Context, add, remove []string, base *corev1.ConfigMap) (int, error) {
	added := 0
	key := types.NamespacedName{Namespace: s.Namespace, Name: BlocklistName}
	err := writeRetry(func() error {
		cm := &corev1.ConfigMap{}
		create := false
		var err error
		fromBase := base != nil
		if fromBase {
			cm, base = base, nil
		} else {
			err = s.Reader.Get(ctx, key, cm)
		}
		if err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			if len(add) == 0 {
				return nil
			}
			create = true
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: BlocklistName,
				Labels: map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}}}
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := false
		if cm.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			// The manager caches only its own ConfigMaps: label one made elsewhere, once.
			if cm.Labels == nil {
				cm.Labels = map[string]string{}
			}
			cm.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
			changed = true
		}
		for _, fp := range remove {
			if _, ok := cm.Data[fp]; ok {
				delete(cm.Data, fp)
				changed = true
			}
		}
		added = 0
		for _, fp := range add {
			if _, ok := cm.Data[fp]; !ok {
				cm.Data[fp] = ""
				changed = true
				added++
			}
		}
		if !changed {
			if fromBase {
				// Only a write checks base's version: a key base holds may have been removed
				// since, so "nothing to add" is confirmed on a live read.
				return errReadAgain
			}
			return nil
		}
		if added > 0 && BlocklistBytes(cm.Data) > BlocklistBudget {
			return fmt.Errorf("%w: %d keys would take %d bytes of its %d", ErrBlocklistFull, len(cm.Data), BlocklistBytes(cm.Data), BlocklistBudget)
		}
		if create {
			return s.Client.Create(ctx, cm)
		}
		resetManagedFields(cm)
		err = s.Client.Update(ctx, cm)
		if fromBase && apierrors.IsNotFound(err) {
			// Deleted since base was read: read again, and create it.
			return errReadAgain
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("updating %s/%s (+%d, -%d keys): %w", s.Namespace, BlocklistName, len(add), len(remove), err)
	}
	return added, nil
}

// Blocklist returns the keys of the principal's blocklist.
func (s Store) Blocklist(ctx context.Context) (map[string]string, error) {
	cm, err := s.readBlocklist(ctx)
	if err != nil || cm == nil {
		return map[string]string{}, err
	}
	return cm.Data, nil
}

// readBlocklist reads the principal's blocklist live; nil when there is none.
func (s Store) readBlocklist(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: BlocklistName}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return cm, nil
}

// resetManagedFields asks the API server to drop the object's managed fields before it records
// this update's. Every key of these ConfigMaps would otherwise be listed a second time there,
// doubling the blocklist's size per key (about 70 bytes of data, 70 more of managed fields)
// and halving how many keys fit in etcd's object size limit.
func resetManagedFields(cm *corev1.ConfigMap) {
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{}}
}

// Labels are the labels of cluster's ledger, recorded for owner.
func Labels(cluster string, owner Owner) map[string]string {
	l := recordLabels(RecordLedger)
	l[LabelCluster] = cluster
	if owner.Name != "" {
		l[v1alpha1.LabelOwnerNamespace] = owner.Namespace
		l[v1alpha1.LabelOwnerName] = owner.Name
	}
	return l
}

func recordLabels(kind string) map[string]string {
	return map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, LabelRecord: kind}
}

func revokedValue(notAfter time.Time, cause Cause, cluster string) string {
	return notAfter.UTC().Format(time.RFC3339) + " " + string(cause) + " " + cluster
}

func parseRevoked(v string) (time.Time, Cause, string, bool) {
	parts := strings.SplitN(v, " ", 3)
	t, err := time.Parse(time.RFC3339, parts[0])
	if err != nil {
		return time.Time{}, "", "", false
	}
	cause, cluster := CauseDeparted, ""
	if len(parts) > 1 {
		cause = Cause(parts[1])
	}
	if len(parts) > 2 {
		cluster = parts[2]
	}
	return t, cause, cluster, true
}

// pruneEntries drops expired and malformed entries (a ledger is written only by this package).
func pruneEntries(data map[string]string, now time.Time) bool {
	changed := false
	for fp, v := range data {
		if _, ok := entry(fp, v, now); !ok {
			delete(data, fp)
			changed = true
		}
	}
	return changed
}

func entry(fp, value string, now time.Time) (time.Time, bool) {
	if !fingerprintPattern.MatchString(fp) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil || !t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

// conflictBackoff outlasts a burst of writers on one object (a renewal wave, a revocation).
var conflictBackoff = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.3, Jitter: 0.5, Cap: time.Second}

// writeRetry retries a read-modify-write on a conflict, or when a Create raced with another.
func writeRetry(fn func() error) error {
	return retry.OnError(conflictBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errLedgerGone) || errors.Is(err, errReadAgain)
	}, fn)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RevokedCauseAndCluster reads why and for which cluster a revocation-record value was written.
func RevokedCauseAndCluster(v string) (Cause, string) {
	_, cause, cluster, _ := parseRevoked(v)
	return cause, cluster
}

// RevokedExpired reports whether a revocation-record value is well-formed and expired at now.
// A value that does not parse is never expired: its key stays blocked.
func RevokedExpired(v string, now time.Time) bool {
	t, _, _, ok := parseRevoked(v)
	return ok && !t.After(now)
}

// RevokedNotAfter is when the certificate of a revocation record entry expires; false when the
// entry does not parse (such an entry never expires).
func RevokedNotAfter(v string) (time.Time, bool) {
	t, _, _, ok := parseRevoked(v)
	return t, ok
}

// ValidFingerprint reports whether fp is a fingerprint as this package writes them.
func ValidFingerprint(fp string) bool { return fingerprintPattern.MatchString(fp) }
