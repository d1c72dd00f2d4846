package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/clustersecrets"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// rawSigner is the signer the raw pace's CSRs name: the manager does not serve it.
const rawSigner = "bench.argocd-agent-addon.io/raw"

// rawSigning is what a raw CSR phase works with, made before it starts.
type rawSigning struct {
	// newAgent makes a client of one cluster's agent (agentClients).
	newAgent func(cluster string) (kubernetes.Interface, error)
	// signer is the raw writer's client (rawWriterConfig's), ca the certificates' issuer.
	signer kubernetes.Interface
	ca     *pki.KeyPair
	// ledgers holds each cluster's ledger-shaped ConfigMap (rawLedgers); nil records nothing.
	ledgers map[string]*corev1.ConfigMap
	// issued holds once the phase's certificates are all seen (always without an informer).
	issued func(context.Context) (bool, string)
}

// rawCSRs is the API server's own pace for the wave's work: each cluster's agent creates a CSR,
// and a plain client with no checks approves it and publishes a certificate (3 writes, the
// least any signer can do), 16 CSRs at a time. With ledgers, the client also records each
// certificate in its cluster's ledger-shaped ConfigMap before it publishes it, as the manager's
// signer must so that every certificate that exists can be revoked (4 writes: the least a
// signer that records can do). The phase ends when every certificate is published and issued
// holds (the informed pace's informer has seen them all). The CSRs name a signer the manager
// does not serve; deleteRawCSRs deletes them.
func rawCSRs(ctx context.Context, r rawSigning, clusters []string) (time.Duration, error) {
	newAgent, signer, ca, ledgers := r.newAgent, r.signer, r.ca, r.ledgers
	start := time.Now()
	err := fakehub.ParallelN(agentsInFlight, clusters, func(cluster string) error {
		cs, err := newAgent(cluster)
		if err != nil {
			return err
		}
		csr, err := testenv.AgentCSR(cluster, cluster, addonName, rawSigner)
		if err != nil {
			return err
		}
		if csr, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
			return err
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Bench"})
		if csr, err = signer.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return err
		}
		block, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return err
		}
		certPEM, cert, err := ca.SignClientCertificate(req.PublicKey, req.Subject, req.DNSNames, time.Hour, time.Now())
		if err != nil {
			return err
		}
		if cm := ledgers[cluster]; cm != nil {
			cm.Data[pki.Fingerprint(cert)] = cert.NotAfter.UTC().Format(time.RFC3339)
			if _, err := signer.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		csr.Status.Certificate = certPEM
		_, err = signer.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := waitForInformer(ctx, r.issued); err != nil {
		return 0, fmt.Errorf("the raw signer's informer: %w", err)
	}
	return time.Since(start), nil
}

// csrPace is one way the raw signer works.
type csrPace struct {
	// name is the phase's name in the profiles.
	name string
	// recorded: a ledger record before each certificate (4 writes per request, not 3).
	recorded bool
	// informed: the writer keeps informers on the kinds it writes, its signer's CSRs and the
	// ledgers, the watches any controller pays for (a fan-out of one each).
	informed bool
}

var (
	threeWrites        = csrPace{name: "raw-csrs"}
	fourWrites         = csrPace{name: "raw-recorded-csrs", recorded: true}
	fourWritesInformed = csrPace{name: "raw-recorded-csrs-informed", recorded: true, informed: true}
)

// rawCSRPace measures rawCSRs working as p says, and deletes what the phase made, so that the
// phases after it do not pay for it. suffix ends the phase's name in the profiles ("" before
// the manager starts).
func (b *fleetRun) rawCSRPace(p csrPace, suffix string) (cpuShare, error) {
	ctx, env, clusters := b.ctx, b.env, b.clusters
	r := rawSigning{newAgent: b.agents, issued: always}
	var err error
	if r.signer, err = kubernetes.NewForConfig(protobuf(b.rawWriter)); err != nil {
		return cpuShare{}, err
	}
	if r.ca, err = pki.NewCA("bench raw signer", time.Hour, time.Now()); err != nil {
		return cpuShare{}, err
	}
	if p.recorded {
		if r.ledgers, err = rawLedgers(ctx, env, clusters); err != nil {
			return cpuShare{}, err
		}
	}
	stopInformers := func() {}
	if p.informed {
		// Started and synced before the phase, as the manager's are before the wave.
		if r.issued, stopInformers, err = signerInformers(b.rawWriter, len(clusters)); err != nil {
			return cpuShare{}, err
		}
	}
	share, err := b.measure(p.name+suffix, func() (time.Duration, error) { return rawCSRs(ctx, r, clusters) })
	stopInformers()
	if err != nil {
		return cpuShare{}, err
	}
	if err := deleteRawCSRs(ctx, env); err != nil {
		return cpuShare{}, err
	}
	if p.recorded {
		return share, deleteRawLedgers(ctx, env)
	}
	return share, nil
}

// rawCSRPaces measures the raw CSR paces. The target's pace, 4 writes with informers, runs
// first, so that it does not always pay for the deleted objects the other two leave behind.
// That is all the order does: the machine's pace still drifts between the three phases.
func (b *fleetRun) rawCSRPaces(suffix string) (csrPaces, error) {
	var p csrPaces
	var err error
	if p.fourInformed, err = b.rawCSRPace(fourWritesInformed, suffix); err != nil {
		return p, fmt.Errorf("raw CSR pace with ledger records and informers: %w", err)
	}
	if p.three, err = b.rawCSRPace(threeWrites, suffix); err != nil {
		return p, fmt.Errorf("raw CSR pace: %w", err)
	}
	if p.four, err = b.rawCSRPace(fourWrites, suffix); err != nil {
		return p, fmt.Errorf("raw CSR pace with ledger records: %w", err)
	}
	return p, nil
}

// signerInformers starts informers on what the raw signer writes: the CSRs that name its
// signer (selected on the server, as the manager's are) and the ledgers' ConfigMaps. Once they
// have synced it returns a condition that holds once the CSR informer has seen n CSRs with a
// certificate, and how to stop them.
func signerInformers(cfg *rest.Config, n int) (issued func(context.Context) (bool, string), stop func(), err error) {
	cs, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, nil, err
	}
	certified := newSeenObjects("CSRs with a certificate")
	csrs := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", rawSigner).String()
	}))
	if _, err := csrs.Certificates().V1().CertificateSigningRequests().Informer().AddEventHandler(certified.handler(func(obj any) bool {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		return ok && len(csr.Status.Certificate) > 0
	})); err != nil {
		return nil, nil, err
	}
	ledgers := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(rawLedgersNamespace))
	ledgers.Core().V1().ConfigMaps().Informer()
	stop, err = startInformers("the raw signer's", csrs, ledgers)
	if err != nil {
		return nil, nil, err
	}
	return certified.atLeast(n), stop, nil
}

// startInformers starts the informers of factories and waits until they have synced, for at
// most informerSyncLimit: a list that keeps failing would otherwise hang the run. stop ends
// them and waits for their goroutines; on an error they are already stopped.
func startInformers(whose string, factories ...informers.SharedInformerFactory) (stop func(), err error) {
	ch := make(chan struct{})
	stop = func() {
		close(ch)
		for _, f := range factories {
			f.Shutdown()
		}
	}
	// Closed when the limit passes; the informers run on until stop.
	giveUp := make(chan struct{})
	timer := time.AfterFunc(informerSyncLimit, func() { close(giveUp) })
	defer timer.Stop()
	for _, f := range factories {
		f.Start(ch)
		for typ, ok := range f.WaitForCacheSync(giveUp) {
			if !ok {
				stop()
				return nil, fmt.Errorf("%s informer of %v did not sync within %s", whose, typ, informerSyncLimit)
			}
		}
	}
	return stop, nil
}

// informerSyncLimit bounds a raw writer's informers' first list.
const informerSyncLimit = 5 * time.Minute

// rawLedgersNamespace holds rawLedgers' ConfigMaps.
const rawLedgersNamespace = "raw-ledgers"

// rawLedgers creates, for each cluster, a ConfigMap of the shape of the signer's ledger after a
// registration (the ledger's own labels and one certificate's entry), which a renewal
// updates. Their managed-by label is not the manager's, so its cache (ledger.Selector) never
// holds them; deleteRawLedgers deletes them after each measurement and leaves the namespace
// for the next.
func rawLedgers(ctx context.Context, env *testenv.Env, clusters []string) (map[string]*corev1.ConfigMap, error) {
	admin, err := kubernetes.NewForConfig(unthrottled(env.Config))
	if err != nil {
		return nil, err
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawLedgersNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := grantRawWriter(ctx, env, rawLedgersNamespace); err != nil {
		return nil, err
	}
	notAfter := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	var mu sync.Mutex
	out := make(map[string]*corev1.ConfigMap, len(clusters))
	err = fakehub.Parallel(clusters, func(cluster string) error {
		labels := ledger.Labels(cluster, ledger.Owner{Namespace: namespace, Name: gitOpsClusterName})
		labels[v1alpha1.LabelManagedBy] = "bench-raw-ledger"
		cm, err := admin.CoreV1().ConfigMaps(rawLedgersNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ledger.LedgerName(cluster), Labels: labels},
			Data:       map[string]string{strings.Repeat("0", 64): notAfter},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		out[cluster] = cm
		mu.Unlock()
		return nil
	})
	return out, err
}

// deleteRawLedgers deletes rawLedgers' ConfigMaps.
func deleteRawLedgers(ctx context.Context, env *testenv.Env) error {
	admin, err := kubernetes.NewForConfig(unthrottled(env.Config))
	if err != nil {
		return err
	}
	return admin.CoreV1().ConfigMaps(rawLedgersNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// deleteRawSecrets deletes the raw writes' Secrets (and their finalizers).
func deleteRawSecrets(ctx context.Context, env *testenv.Env, namespaces ...string) error {
	admin, err := kubernetes.NewForConfig(unthrottled(env.Config))
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		secrets := admin.CoreV1().Secrets(ns)
		if err := secrets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		left, err := secrets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		finalized := []byte(`{"metadata":{"finalizers":null}}`)
		if err := fakehub.Parallel(left.Items, func(s corev1.Secret) error {
			_, err := secrets.Patch(ctx, s.Name, types.MergePatchType, finalized, metav1.PatchOptions{})
			return client.IgnoreNotFound(err)
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteRawCSRs deletes the CSRs rawCSRs made.
func deleteRawCSRs(ctx context.Context, env *testenv.Env) error {
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	return admin.CertificatesV1().CertificateSigningRequests().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "spec.signerName=" + rawSigner})
}

// protobuf is cfg speaking protobuf, as controller-runtime's clients and informers (the
// manager's) do for built-in kinds: a raw writer's requests and informer then cost the API
// server what a controller's do, and the wave's events, which both the manager and the
// benchmark's watch receive, are encoded once.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// unthrottled is cfg with no client-side rate limit: the raw phases measure the API server, not
// client-go's limiter.
func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// rawWritesPhase measures the API server's own pace, rawWrites, as the phase name: the raw
// writer creates b.shape's n Secrets in namespace ns, made for the phase and emptied after it.
// Informed, the writer keeps an informer on the Secrets it writes, as any controller must (a
// watch fan-out of one), started and synced before the phase; the phase then ends when the
// informer has seen all n.
func (b *fleetRun) rawWritesPhase(name, ns string, informed bool) (cpuShare, error) {
	ctx, env := b.ctx, b.env
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return cpuShare{}, err
	}
	if err := grantRawWriter(ctx, env, ns); err != nil {
		return cpuShare{}, err
	}
	writer, err := kubernetes.NewForConfig(protobuf(b.rawWriter))
	if err != nil {
		return cpuShare{}, err
	}
	secrets := make([]*corev1.Secret, b.n)
	for i := range secrets {
		secrets[i] = b.shape(i)
		secrets[i].Namespace = ns
	}
	held, stop := always, func() {}
	if informed {
		if held, stop, err = secretInformer(b.rawWriter, ns, b.n); err != nil {
			return cpuShare{}, err
		}
	}
	share, err := b.measure(name, func() (time.Duration, error) { return rawWrites(ctx, writer, secrets, held) })
	stop()
	if err != nil {
		return cpuShare{}, err
	}
	return share, deleteRawSecrets(ctx, env, ns)
}

// rawWrites creates secrets by writer, 16 at a time, and waits until held holds.
func rawWrites(ctx context.Context, writer kubernetes.Interface, secrets []*corev1.Secret, held func(context.Context) (bool, string)) (time.Duration, error) {
	start := time.Now()
	if err := fakehub.Parallel(secrets, func(s *corev1.Secret) error {
		_, err := writer.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
		return err
	}); err != nil {
		return 0, err
	}
	if err := waitForInformer(ctx, held); err != nil {
		return 0, fmt.Errorf("the raw writer's informer: %w", err)
	}
	return time.Since(start), nil
}

// always is the condition of a raw phase with no informer: the writes are the phase.
func always(context.Context) (bool, string) { return true, "" }

// waitForInformer waits until a raw writer's informer has seen what seen asks, checking often
// (the wait is part of the phase's time) and for at most 10 minutes.
func waitForInformer(ctx context.Context, seen func(context.Context) (bool, string)) error {
	return poll.Waiter{Every: 5 * time.Millisecond}.Wait(ctx, 10*time.Minute, seen)
}

// secretInformer starts an informer on the Secrets of ns. Once it has synced it returns a
// condition that holds once it has seen n, and how to stop it.
func secretInformer(cfg *rest.Config, ns string, n int) (held func(context.Context) (bool, string), stop func(), err error) {
	cs, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return nil, nil, err
	}
	secrets := newSeenObjects("Secrets")
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Secrets().Informer().AddEventHandler(secrets.handler(func(any) bool { return true })); err != nil {
		return nil, nil, err
	}
	if stop, err = startInformers("the raw writer's", factory); err != nil {
		return nil, nil, err
	}
	return secrets.atLeast(n), stop, nil
}

// clusterSecretShape returns Secrets of the shape and size of the manager's agent cluster
// secrets for clusters, built by the manager's own code, with a client certificate, key and CA
// issued as the manager issues them (one set shared by all: the content does not change the
// API server's work). The manager also copies a ManagedCluster's labels onto its secret; the
// benchmark's ManagedClusters have none.
func clusterSecretShape(clusters []string) (func(i int) *corev1.Secret, error) {
	now := time.Now()
	ca, err := pki.NewCA("raw-writes", 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: clusters[0]}, 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := agentsecret.NewConfig(kp, ca.CertPEM)
	if err != nil {
		return nil, err
	}
	owner := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName}}
	cfg := config.Default()
	return func(i int) *corev1.Secret {
		return clustersecrets.ClusterSecret(cfg, owner, namespace, clusters[i], tlsConfig)
	}, nil
}
