package signer

import (
	"context"
	"crypto/x509"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// LedgerName is the ConfigMap, in a cluster's own hub namespace, that lists the client
// certificates issued to that cluster's agent and not yet expired: data key = pki.Fingerprint,
// value = NotAfter in RFC 3339. Revoke copies it into the principal's blocklist.
const LedgerName = "argocd-agent-issued-certificates"

var fingerprintPattern = regexp.MustCompile(`^[0-9A-F]{64}$`)

// writeRetry retries a read-modify-write on a conflict, or when a Create raced with another.
func writeRetry(fn func() error) error {
	return retry.OnError(retry.DefaultBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, fn)
}

func managedLabels() map[string]string {
	return map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
}

// RecordIssued adds cert to the ledger of cluster (namespace = cluster name, which OCM creates
// with the ManagedCluster) and drops entries that have expired at now.
func RecordIssued(ctx context.Context, c client.Client, cluster string, cert *x509.Certificate, now time.Time) error {
	fp := pki.Fingerprint(cert)
	notAfter := cert.NotAfter.UTC().Format(time.RFC3339)
	key := types.NamespacedName{Namespace: cluster, Name: LedgerName}
	return writeRetry(func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: LedgerName, Labels: managedLabels()},
				Data:       map[string]string{fp: notAfter},
			}
			return c.Create(ctx, cm)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		changed := pruneLedger(cm.Data, now)
		if cm.Data[fp] != notAfter {
			cm.Data[fp] = notAfter
			changed = true
		}
		if !changed {
			return nil
		}
		return c.Update(ctx, cm)
	})
}

// pruneLedger drops expired entries, and entries that are not ours to read (the ledger is
// written only by the signer).
func pruneLedger(data map[string]string, now time.Time) bool {
	changed := false
	for fp, v := range data {
		if _, ok := ledgerEntry(fp, v, now); !ok {
			delete(data, fp)
			changed = true
		}
	}
	return changed
}

// ledgerEntry parses one entry and reports whether it is well-formed and unexpired at now.
func ledgerEntry(fp, value string, now time.Time) (time.Time, bool) {
	if !fingerprintPattern.MatchString(fp) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil || !t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

// readLedger returns the ledger of cluster (nil when it does not exist) and its unexpired entries.
func readLedger(ctx context.Context, c client.Reader, cluster string, now time.Time) (*corev1.ConfigMap, map[string]time.Time, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: LedgerName}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading the certificate ledger of cluster %s: %w", cluster, err)
	}
	out := map[string]time.Time{}
	for fp, v := range cm.Data {
		if t, ok := ledgerEntry(fp, v, now); ok {
			out[fp] = t
		}
	}
	return cm, out, nil
}
