package clustersecrets

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/parallel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// resourceProxyServer is the address Argo CD reaches cluster at: the principal's resource
// proxy, which picks the agent by name.
func resourceProxyServer(cfg config.Config, principalNS, cluster string) string {
	return fmt.Sprintf("https://%s.%s.svc:%d?agentName=%s", cfg.ResourceProxyServiceName, principalNS, cfg.ResourceProxyPort, cluster)
}

// Sync keeps one argocd-agent cluster secret per owned cluster (except the ones a person
// revoked, on the principal or in goc's spec) and renews its client certificate before expiry
// or after a CA change. Every certificate it issues is recorded in the cluster's ledger before
// the secret is written, so it is revoked with the agent's. Removing secrets is the
// revocation's job. store is the principal's ledger store. byCluster holds goc's cluster
// secrets as the cache lists them (read only). It returns the earliest renewal time.
func (w *Writer) Sync(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS string, obs *selection.Observation, hub *principalpki.PKI,
	byCluster map[string]*corev1.Secret, revoked sets.Set[string], store ledger.Store) (time.Time, error) {
	owner := ledger.Owner{Namespace: goc.Namespace, Name: goc.Name}
	now := w.Config.Now()
	var next time.Time
	type write struct {
		cluster string
		live    *corev1.Secret
	}
	var writes []write
	// The principal namespace's cached Secrets by name, listed once when first needed: a new
	// fleet misses every cluster, and one cache read per cluster costs more than one list.
	var inNamespace map[string]*corev1.Secret
	caFingerprint := pki.Fingerprint(hub.CA.Cert)
	var refused refusedCertificates
	if obs.Owned.Len() > 0 {
		var err error
		if refused, err = w.refusedCertificates(ctx, principalNS); err != nil {
			return time.Time{}, err
		}
	}
	for _, cluster := range sets.List(obs.Owned) {
		if revoked.Has(cluster) {
			continue
		}
		s := byCluster[cluster]
		if s == nil {
			// The secret may exist without our owner labels (made by hand or by another
			// GitOpsCluster that owned the cluster before); look it up by name.
			if inNamespace == nil {
				var err error
				if inNamespace, err = w.secretsByName(ctx, principalNS); err != nil {
					return time.Time{}, err
				}
			}
			s = inNamespace[agentsecret.Name(cluster)]
		}
		if s != nil && !s.DeletionTimestamp.IsZero() {
			// Going: its certificate is being recorded (CertificateRecorder); once it is gone,
			// its deletion wakes this GitOpsCluster and a new one is written.
			continue
		}
		renewAt, fingerprint, current := w.clusterSecretCurrent(s, goc, principalNS, cluster, hub, caFingerprint, now)
		if current && refused.has(fingerprint) {
			// A certificate that was revoked (or blocked by hand) is never kept, however the
			// secret came to hold it again: a backup restored, a GitOps tool re-applying an old
			// copy, a revocation whose deletion failed. argocd-agent's resource proxy would still
			// take it. The cache may lag a revocation that is deleting the secret right now,
			// so the secret is read live first; its deletion wakes this GitOpsCluster.
			live, err := w.liveSecret(ctx, principalNS, cluster)
			if err != nil {
				return time.Time{}, err
			}
			if live == nil || !live.DeletionTimestamp.IsZero() {
				continue
			}
			s = live
			renewAt, fingerprint, current = w.clusterSecretCurrent(s, goc, principalNS, cluster, hub, caFingerprint, now)
			current = current && !refused.has(fingerprint)
		}
		if current {
			if next.IsZero() || renewAt.Before(next) {
				next = renewAt
			}
			if err := w.ensureRecordFinalizer(ctx, s, cluster); err != nil {
				return time.Time{}, err
			}
			continue
		}
		writes = append(writes, write{cluster: cluster, live: s})
	}

	// The writes are independent, one object per cluster: several at once keep a fleet's
	// first registration close to the API server's own pace instead of one round trip after
	// another.
	var mu sync.Mutex
	var errs []error
	created := 0
	parallel.Each(w.Config.WriteConcurrency, writes, func(one write) {
		renewAt, isNew, err := w.writeClusterSecret(ctx, goc, principalNS, one.cluster, one.live, hub, store, owner, refused, now)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, err)
		case isNew:
			created++
		}
		if err == nil && (next.IsZero() || renewAt.Before(next)) {
			next = renewAt
		}
	})
	// Counted before any error returns: the secrets written stay written. No Event for a
	// registration: it is routine, the status counts the agents, and the log and
	// the metric record it. An Event per pass would be a write in every cluster's join (its
	// secret, the status and its components' probe are the others); failures get Events.
	if created > 0 {
		agentsRegistered.Add(float64(created))
		log.FromContext(ctx).Info("registered agents with the principal", "count", created, "principalNamespace", principalNS)
	}
	if err := errors.Join(errs...); err != nil {
		return time.Time{}, err
	}
	return next, nil
}

// secretsByName lists the namespace's cached Secrets (read only) by name.
func (w *Writer) secretsByName(ctx context.Context, ns string) (map[string]*corev1.Secret, error) {
	var list corev1.SecretList
	if err := w.Client.List(ctx, &list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make(map[string]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// liveSecret reads cluster's secret past the cache; nil when there is none.
func (w *Writer) liveSecret(ctx context.Context, ns, cluster string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := w.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsecret.Name(cluster)}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return s, nil
}

// ensureRecordFinalizer adds the certificate-record finalizer to a current cluster secret a
// release without it wrote, alone, without a new certificate. s may be the cache's own object:
// a copy is changed.
func (w *Writer) ensureRecordFinalizer(ctx context.Context, s *corev1.Secret, cluster string) error {
	if controllerutil.ContainsFinalizer(s, v1alpha1.FinalizerRecordCertificate) {
		return nil
	}
	c := s.DeepCopy()
	patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(c, v1alpha1.FinalizerRecordCertificate)
	if err := w.Client.Patch(ctx, c, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("adding the certificate-record finalizer to the cluster secret of %s: %w", cluster, err)
	}
	return nil
}

// writeClusterSecret issues a new resource-proxy certificate for cluster and creates or
// updates its cluster secret. It returns the renewal time and whether the secret is new.
func (w *Writer) writeClusterSecret(ctx context.Context, goc *v1alpha1.GitOpsCluster, principalNS, cluster string, live *corev1.Secret,
	hub *principalpki.PKI, store ledger.Store, owner ledger.Owner, refused refusedCertificates, now time.Time) (time.Time, bool, error) {
	desired, cert, err := w.buildClusterSecret(goc, principalNS, cluster, hub, now)
	if err != nil {
		return time.Time{}, false, err
	}
	if err := w.withClusterLabels(ctx, desired, cluster); err != nil {
		return time.Time{}, false, err
	}
	// The current certificate is revoked from the secret itself; the one it replaces is
	// recorded first, since it stays valid until it expires. A new cluster thus costs one
	// write, a renewal two. One already revoked is not recorded again, as CertificateRecorder
	// does: it is blocked until it expires, and a ledger entry would count against the cluster.
	if old, _ := agentsecret.Contents(live); old.Fingerprint != "" && old.NotAfter.After(now) && !refused.has(old.Fingerprint) {
		if err := store.RecordFingerprint(ctx, cluster, owner, old.Fingerprint, old.NotAfter, 0, now); err != nil {
			return time.Time{}, false, fmt.Errorf("recording the replaced resource-proxy certificate of %s: %w", cluster, err)
		}
	}
	if live == nil {
		err = w.Client.Create(ctx, desired)
		if apierrors.IsAlreadyExists(err) {
			// A secret of that name the cache does not hold (made by hand, without the
			// project's labels): take it over, as with one found by name.
			live = &corev1.Secret{}
			if err = w.Reader.Get(ctx, client.ObjectKeyFromObject(desired), live); err == nil {
				err = w.replaceClusterSecret(ctx, live, desired)
			}
		}
	} else {
		err = w.replaceClusterSecret(ctx, live, desired)
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("writing cluster secret for %s: %w", cluster, err)
	}
	return pki.RenewalTime(cert), live == nil, nil
}

// replaceClusterSecret updates live to desired's labels, annotations, type and whole data. live
// may be the cache's compact form: none of its data survives.
func (w *Writer) replaceClusterSecret(ctx context.Context, live, desired *corev1.Secret) error {
	written := live.DeepCopy()
	written.Labels, written.Annotations, written.Data, written.Type = desired.Labels, desired.Annotations, desired.Data, desired.Type
	for _, f := range desired.Finalizers {
		controllerutil.AddFinalizer(written, f)
	}
	return w.Client.Update(ctx, written)
}

// clusterSecretCurrent reports whether s is already what we would write, and when it must be
// renewed, with its certificate's fingerprint. s may be the cache's compact form
// (agentsecret.Compact): the certificate was read when the secret entered the cache (checked
// then, or known from its issuance here), not on every pass.
func (w *Writer) clusterSecretCurrent(s *corev1.Secret, goc *v1alpha1.GitOpsCluster, principalNS, cluster string, hub *principalpki.PKI, caFingerprint string, now time.Time) (time.Time, string, bool) {
	if s == nil || !names.HasLabels(s.Labels, clusterSecretLabels(goc, cluster)) || s.Annotations[v1alpha1.AnnotationSkipReconcile] != "true" ||
		string(s.Data["name"]) != cluster || string(s.Data["server"]) != resourceProxyServer(w.Config, principalNS, cluster) {
		return time.Time{}, "", false
	}
	cert, bundle := agentsecret.Contents(s)
	if !bytes.Equal(bundle, hub.Bundle) || cert.CommonName != cluster || !cert.Usable(caFingerprint, now) {
		return time.Time{}, "", false
	}
	renewAt := cert.RenewalTime()
	return renewAt, cert.Fingerprint, now.Before(renewAt)
}

// refusedCertificates are the fingerprints the principal's revocation record and blocklist
// hold, as the cache has them (read only).
type refusedCertificates struct {
	record    map[string]map[string]string
	blocklist map[string]string
}

func (r refusedCertificates) has(fingerprint string) bool {
	if !ledger.ValidFingerprint(fingerprint) {
		return false
	}
	if _, ok := r.blocklist[fingerprint]; ok {
		return true
	}
	_, ok := r.record[ledger.ShardName(fingerprint)][fingerprint]
	return ok
}

// refusedCertificates reads, from the cache and without copies, the principal's revocation
// record (16 shards) and blocklist: one list and one read per pass, whatever the fleet's size,
// and a map lookup per secret. Both are the manager's own ConfigMaps (labelled, so cached); a
// record change wakes every GitOpsCluster of the principal, a key added by hand to the
// blocklist is seen at the next pass.
func (w *Writer) refusedCertificates(ctx context.Context, ns string) (refusedCertificates, error) {
	var shards corev1.ConfigMapList
	if err := w.Client.List(ctx, &shards, client.InNamespace(ns), client.MatchingLabels{ledger.LabelRecord: ledger.RecordRevoked}, client.UnsafeDisableDeepCopy); err != nil {
		return refusedCertificates{}, fmt.Errorf("reading the revocation record in %s: %w", ns, err)
	}
	out := refusedCertificates{record: make(map[string]map[string]string, len(shards.Items))}
	for i := range shards.Items {
		out.record[shards.Items[i].Name] = shards.Items[i].Data
	}
	blocklist := &corev1.ConfigMap{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ledger.BlocklistName}, blocklist, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil {
		return refusedCertificates{}, fmt.Errorf("reading the blocklist in %s: %w", ns, err)
	}
	out.blocklist = blocklist.Data
	return out, nil
}

func clusterSecretLabels(goc *v1alpha1.GitOpsCluster, cluster string) map[string]string {
	l := names.OwnerLabels(goc)
	l[v1alpha1.LabelSecretType] = "cluster"
	l[v1alpha1.LabelAgentName] = cluster
	return l
}

func (w *Writer) buildClusterSecret(goc *v1alpha1.GitOpsCluster, principalNS, cluster string, hub *principalpki.PKI, now time.Time) (*corev1.Secret, *x509.Certificate, error) {
	// The flag is checked at start-up; a Config built elsewhere (a test, the benchmark) gets the
	// same bounds here.
	validity := w.Config.ClusterSecretValidity
	switch {
	case validity <= 0:
		validity = config.DefaultClusterSecretValidity
	case validity < config.MinClusterSecretValidity:
		validity = config.MinClusterSecretValidity
	case validity > config.MaxClusterSecretValidity:
		validity = config.MaxClusterSecretValidity
	}
	kp, err := hub.CA.IssueClientCert(pkix.Name{CommonName: cluster}, validity, now)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing the resource-proxy client certificate for %s: %w", cluster, err)
	}
	tlsConfig, err := agentsecret.NewVouchedConfig(kp, hub.CA, hub.Bundle)
	if err != nil {
		return nil, nil, err
	}
	return ClusterSecret(w.Config, goc, principalNS, cluster, tlsConfig), kp.Cert, nil
}

// ClusterSecret is the cluster secret, in principalNS and owned by goc, through which Argo CD
// reaches cluster: the principal's resource proxy, with tlsConfig (agentsecret.NewConfig) as
// its client certificate and trust. The fleet benchmark writes Secrets of this shape for its
// baseline.
func ClusterSecret(cfg config.Config, goc *v1alpha1.GitOpsCluster, principalNS, cluster string, tlsConfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: agentsecret.Name(cluster), Namespace: principalNS,
			Labels:      clusterSecretLabels(goc, cluster),
			Annotations: map[string]string{v1alpha1.AnnotationSkipReconcile: "true"},
			Finalizers:  []string{v1alpha1.FinalizerRecordCertificate},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"name":   []byte(cluster),
			"server": []byte(resourceProxyServer(cfg, principalNS, cluster)),
			"config": tlsConfig,
		},
	}
}
