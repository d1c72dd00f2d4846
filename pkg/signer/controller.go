package signer

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/recorder"
)

// Reasons of the lookups the controller makes before CheckCSR. Like the CheckCSR reasons they
// end up in the CSR's Failed condition, in an Event and in the csr_total metric.
const (
	// ReasonUnknownCluster: no ManagedCluster of the labelled name exists (or it is being deleted).
	ReasonUnknownCluster = "UnknownCluster"
	// ReasonNotSelected: no GitOpsCluster's Placement selects the labelled cluster.
	ReasonNotSelected = "NotSelected"
	// ReasonInvalidAgentName: the cluster name cannot be an argocd-agent agent name for the
	// owning GitOpsCluster's principal (not a DNS label, or equal to the principal namespace).
	ReasonInvalidAgentName = "InvalidAgentName"
	// ReasonNoTemplate: the owning GitOpsCluster's AddOnTemplate is missing, or has no
	// CustomSigner registration for this signer.
	ReasonNoTemplate = "NoTemplate"
	// ReasonTemplateSubject: the AddOnTemplate names a certificate subject; the signer issues
	// only the one it derives for the cluster.
	ReasonTemplateSubject = "TemplateSubjectNotAllowed"
	// ReasonCAUnavailable: the owning GitOpsCluster's hub CA secret is missing, unusable or
	// cannot sign.
	ReasonCAUnavailable = "CAUnavailable"
	// ReasonClusterNotAccepted: the hub does not accept the cluster (spec.hubAcceptsClient false).
	ReasonClusterNotAccepted = "ClusterNotAccepted"
	// ReasonRevoked: an AgentRevocation names the cluster, on any principal, or the owning
	// GitOpsCluster lists it in spec.revokedClusters.
	ReasonRevoked = names.ReasonCSRRevoked
	// ReasonTooManyCertificates: the cluster already holds the maximum number of unexpired
	// certificates from this signer.
	ReasonTooManyCertificates = "TooManyCertificates"
	// ReasonPrincipalNotAllowed: the owning GitOpsCluster may not use its principal namespace.
	ReasonPrincipalNotAllowed = "PrincipalNotAllowed"
)

// ReasonApproved is the reason of the Approved condition this signer adds to a CSR it signs;
// ReasonSigned is the reason of its Event and of the metric series of signed CSRs.
const (
	ReasonApproved = "ApprovedByArgoCDAgentAddonSigner"
	ReasonSigned   = "Signed"
)

// AllReasons lists every reason the controller may write into a Failed condition: the lookup
// reasons followed by Reasons().
func AllReasons() []string {
	return append([]string{
		ReasonUnknownCluster,
		ReasonNotSelected,
		ReasonInvalidAgentName,
		ReasonNoTemplate,
		ReasonCAUnavailable,
		ReasonClusterNotAccepted,
		ReasonRevoked,
		ReasonTooManyCertificates,
		ReasonPrincipalNotAllowed,
	}, Reasons()...)
}

// Defaults of Config.
const (
	// DefaultValidity is the lifetime of an agent client certificate when the owning
	// GitOpsCluster sets no spec.argoCDAgentAddon.clientCertificateValidity. It matches the
	// lifetime OCM's own addon signer uses. OCM's registration agent renews with 20-25 % of the
	// lifetime left (about 5 h here), and argocd-agent v0.9.0 has no blocklist, so a removed
	// cluster's agent is shut out there only when its certificate expires: short is safer.
	DefaultValidity = 24 * time.Hour
	// DefaultMaxCSRAge refuses CSRs older than this: OCM's registration agent waits for its
	// CSR and makes a new one when it fails, so an hour-old pending CSR is stale (a signer
	// outage, or a request replayed from before the cluster's removal).
	DefaultMaxCSRAge = time.Hour
	// DefaultMaxCertificatesPerCluster bounds the unexpired certificates one cluster may hold:
	// OCM renews about every 20 hours, so a healthy agent holds one or two. The bound keeps a
	// cluster that floods valid requests from growing the ledger and the blocklist.
	DefaultMaxCertificatesPerCluster = 10
)

// Config configures the signer.
type Config struct {
	// SignerName is the CustomSigner name; only CSRs with this spec.signerName are handled.
	SignerName string
	// AddonName is the addon the CSRs must be labelled with (the ClusterManagementAddOn name).
	AddonName string
	// DefaultValidity is the certificate lifetime when the owner sets none.
	DefaultValidity time.Duration
	// MaxCSRAge refuses older CSRs; zero or negative disables the check.
	MaxCSRAge time.Duration
	// MaxCertificatesPerCluster refuses a cluster's request while it holds that many unexpired
	// certificates; zero or negative disables the check.
	MaxCertificatesPerCluster int
	// RequestBurst and RequestInterval pace each requester's certificate requests: RequestBurst
	// at once, then one per RequestInterval. A request over the budget waits, unanswered (no
	// write). Zero disables the pacing.
	RequestBurst    int
	RequestInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NamespaceServed reports whether the manager serves the principal namespace ns. An
	// AgentRevocation holds on every principal, but only from a namespace the manager serves:
	// elsewhere it is not enforced, and refuses nothing. Nil: every namespace is served.
	NamespaceServed func(ns string) bool
}

// DefaultConfig returns the defaults, with the addon and signer names the GitOpsCluster
// reconciler uses by default.
func DefaultConfig() Config {
	return Config{
		SignerName:      addon.DefaultSignerName,
		AddonName:       addon.DefaultAddonName,
		DefaultValidity: DefaultValidity,
		MaxCSRAge:       DefaultMaxCSRAge,
		Now:             time.Now,

		MaxCertificatesPerCluster: DefaultMaxCertificatesPerCluster,
		RequestBurst:              DefaultRequestBurst,
		RequestInterval:           DefaultRequestInterval,
	}
}

// Validate reports a configuration the signer cannot run with.
func (c Config) Validate() error {
	var errs []error
	if c.SignerName == "" {
		errs = append(errs, errors.New("signer name is empty"))
	}
	if c.AddonName == "" {
		errs = append(errs, errors.New("addon name is empty"))
	}
	if c.DefaultValidity < time.Hour {
		errs = append(errs, fmt.Errorf("default client certificate validity %s is shorter than 1h", c.DefaultValidity))
	}
	return errors.Join(errs...)
}

// Reconciler signs the argocd-agent client certificates OCM's registration agents request,
// and refuses every CSR that is not exactly what the agent of a selected cluster asks for.
type Reconciler struct {
	// Client reads through the manager's cache, which carries fleet's field indexes.
	Client client.Client
	// APIReader reads past the cache: whether the cluster is still selected right before
	// publishing, so a cluster removed a moment ago is not signed for.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Config    Config

	finished finishedSet
	limits   requesterLimits
	// fresh shares the confirmation reads of concurrent requests (see freshReader).
	freshOnce sync.Once
	fresh     *freshReader
}

// freshAPIReader is APIReader behind a freshReader.
func (r *Reconciler) freshAPIReader() *freshReader {
	r.freshOnce.Do(func() { r.fresh = newFreshReader(r.APIReader) })
	return r.fresh
}

// SetupWithManager registers the controller. ownership.SetupIndexes must have been called.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.Config.Validate(); err != nil {
		return fmt.Errorf("signer configuration: %w", err)
	}
	if r.Config.Now == nil {
		r.Config.Now = time.Now
	}
	r.limits.burst, r.limits.interval = r.Config.RequestBurst, r.Config.RequestInterval
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = recorder.For(mgr, "argocd-agent-addon-signer")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("csr-signer").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(predicate.NewPredicateFuncs(r.pending))).
		Complete(r)
}

// pending passes the CSRs of this signer that are not final yet.
func (r *Reconciler) pending(o client.Object) bool {
	csr, ok := o.(*certificatesv1.CertificateSigningRequest)
	return ok && csr.Spec.SignerName == r.Config.SignerName && !IsFinal(csr)
}

// IsFinal: a certificate was issued, or the CSR was denied or failed. Nothing changes a final
// CSR, so it is never looked at again.
func IsFinal(csr *certificatesv1.CertificateSigningRequest) bool {
	if len(csr.Status.Certificate) > 0 {
		return true
	}
	for _, c := range csr.Status.Conditions {
		if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status != corev1.ConditionFalse {
			return true
		}
	}
	return false
}

func isApproved(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status != corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// decision is what evaluate found out about one CSR.
type decision struct {
	cluster string
	// owner is the GitOpsCluster whose CA signs, once known.
	owner *v1alpha1.GitOpsCluster
	// request, ca and validity are set when the CSR may be signed.
	request  *x509.CertificateRequest
	ca       *pki.KeyPair
	validity time.Duration
	// rejection is set when it must not.
	rejection *Rejection
}

func rejected(d *decision, r *Rejection) (*decision, error) {
	d.rejection = r
	return d, nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The cache lags only behind this signer's own writes: the CSRs it finished are
	// remembered until the cache shows them final. A CSR read older than the server's is
	// never acted on twice anyway, since every write is conditional on the version read.
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != r.Config.SignerName || IsFinal(csr) || !csr.DeletionTimestamp.IsZero() {
		r.finished.forget(csr.UID)
		return ctrl.Result{}, nil
	}
	if r.finished.has(csr.UID) {
		return ctrl.Result{}, nil
	}
	now := r.Config.Now()
	if wait := r.limits.wait(csr.Spec.Username, now); wait > 0 {
		log.FromContext(ctx).Info("certificate request deferred: its requester is over its request budget", "user", csr.Spec.Username, "retryIn", wait)
		csrDeferred.Inc()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	d, err := r.evaluate(ctx, csr, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.rejection == nil {
		d.rejection, err = r.issue(ctx, csr, d, now)
		if err != nil {
			return ctrl.Result{}, err
		}
		if d.rejection == nil {
			r.finished.add(csr.UID, now)
			return ctrl.Result{}, nil
		}
	}
	if err := r.fail(ctx, csr, d, now); err != nil {
		return ctrl.Result{}, err
	}
	r.finished.add(csr.UID, now)
	return ctrl.Result{}, nil
}

// finishedSet holds the CSRs this signer signed or failed whose final state the cache may
// not show yet. Entries leave when the cache shows them final, or after finishedTTL (a CSR
// deleted before that is never reconciled again).
type finishedSet struct {
	mu        sync.Mutex
	uids      map[types.UID]time.Time
	lastPrune time.Time
}

const finishedTTL = 10 * time.Minute

func (f *finishedSet) add(uid types.UID, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.uids == nil {
		f.uids = map[types.UID]time.Time{}
	}
	f.uids[uid] = now
	// A walk over the set at most once a minute: a renewal wave adds thousands in seconds.
	if now.Sub(f.lastPrune) < finishedTTL/10 {
		return
	}
	f.lastPrune = now
	for u, t := range f.uids {
		if now.Sub(t) > finishedTTL {
			delete(f.uids, u)
		}
	}
}

func (f *finishedSet) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.uids)
}

func (f *finishedSet) has(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.uids[uid]
	return ok
}

func (f *finishedSet) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.uids, uid)
}

// evaluate runs the lookups and CheckCSR. An error is a failed read (the CSR is retried);
// a Rejection is a verdict on the CSR.
func (r *Reconciler) evaluate(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, now time.Time) (*decision, error) {
	d := &decision{}
	cluster, addonName, rej := ClusterOfCSR(csr)
	if rej != nil {
		return rejected(d, rej)
	}
	d.cluster = cluster
	if addonName != r.Config.AddonName {
		return rejected(d, reject(ReasonWrongAddon, "label %s is %s, this signer only serves addon %s",
			AddonNameLabel, short(addonName), r.Config.AddonName))
	}

	// Who asks is decided by the CSR alone: refuse a stranger before any lookup.
	if rej := checkRequester(csr, cluster); rej != nil {
		return rejected(d, rej)
	}

	if rej, err := r.clusterAdmits(ctx, cluster); err != nil || rej != nil {
		if err != nil {
			return nil, err
		}
		return rejected(d, rej)
	}

	selectors, err := ownership.SelectorsOf(ctx, r.Client, cluster)
	if err != nil {
		return nil, err
	}
	if len(selectors) == 0 {
		return rejected(d, reject(ReasonNotSelected,
			"cluster %q is not selected by the Placement of any GitOpsCluster, so no argocd-agent may run there; add it to a GitOpsCluster's Placement and its agent will ask again", cluster))
	}
	owner := selectors[0]
	d.owner = owner
	principalNS := names.PrincipalNamespace(owner)
	if rej, err := r.ownerAdmits(ctx, owner, principalNS, cluster, now); err != nil || rej != nil {
		if err != nil {
			return nil, err
		}
		return rejected(d, rej)
	}

	exp, rej, err := r.expectation(ctx, owner, cluster, now)
	if err != nil {
		return nil, err
	}
	if rej != nil {
		return rejected(d, rej)
	}
	req, rej := CheckCSR(csr, exp)
	if rej != nil {
		if rej.Reason == ReasonInvalidExpectation {
			// A fault on the hub, not in the CSR: leave the CSR alone and retry.
			return nil, fmt.Errorf("signer expectation for cluster %s: %s", cluster, rej.Message)
		}
		return rejected(d, rej)
	}
	d.request = req

	ca, rej, err := r.signingCA(ctx, principalNS, owner)
	if err != nil {
		return nil, err
	}
	if rej != nil {
		return rejected(d, rej)
	}
	d.ca = ca
	d.validity = r.validity(owner, csr)
	return d, nil
}

// clusterAdmits refuses a cluster the hub does not know, is deleting, or has not accepted.
func (r *Reconciler) clusterAdmits(ctx context.Context, cluster string) (*Rejection, error) {
	mc := &clusterv1.ManagedCluster{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: cluster}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return reject(ReasonUnknownCluster,
				"no ManagedCluster %q exists on the hub; label %s must name a registered cluster", cluster, ClusterNameLabel), nil
		}
		return nil, fmt.Errorf("reading ManagedCluster %s: %w", cluster, err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		return reject(ReasonUnknownCluster, "ManagedCluster %q is being deleted; no certificate is issued for it", cluster), nil
	}
	if !mc.Spec.HubAcceptsClient {
		return reject(ReasonClusterNotAccepted, "ManagedCluster %q is not accepted by the hub (spec.hubAcceptsClient is false)", cluster), nil
	}
	return nil, nil
}

// ownerAdmits refuses a cluster its owning GitOpsCluster may not have an agent for: revoked,
// a principal the owner may not use, a name no agent can have, or at its certificate cap.
// The cache decides here; the live confirmation comes after the certificate is recorded
// (stillEntitled), where it also closes the race with a revocation that listed the ledger
// before this record.
func (r *Reconciler) ownerAdmits(ctx context.Context, owner *v1alpha1.GitOpsCluster, principalNS, cluster string, now time.Time) (*Rejection, error) {
	if rej, err := r.revoked(ctx, owner, principalNS, cluster); err != nil || rej != nil {
		return rej, err
	}
	if why, err := ownership.PrincipalAllowed(ctx, r.Client, owner); err != nil {
		return nil, err
	} else if why != "" {
		return reject(ReasonPrincipalNotAllowed, "GitOpsCluster %s/%s may not use the principal in namespace %s: %s", owner.Namespace, owner.Name, principalNS, why), nil
	}
	if why := names.ValidAgentName(cluster, principalNS); why != "" {
		return reject(ReasonInvalidAgentName,
			"cluster name %q cannot be an argocd-agent agent name for the principal in namespace %s (%s); rename the cluster or use another principal namespace",
			cluster, principalNS, why), nil
	}
	// The cap, before anything is approved or signed: a cluster at its limit gets a refusal,
	// not an approved request that then fails. Record checks it again, live.
	return r.atCertificateCap(ctx, principalNS, cluster, now)
}

// stillEntitled confirms on the API server that the owner's Placement still selects cluster
// and that the owner has not revoked it. It reads the owner and the decision page the cache
// names for the cluster, not every page: a renewal wave costs O(1) reads per request, not
// O(fleet).
func (r *Reconciler) stillEntitled(ctx context.Context, cluster string, owner *v1alpha1.GitOpsCluster) (*Rejection, error) {
	// Every read must have started after the record; concurrent requests share them. The
	// cluster's AgentRevocation is read while the owner is, so it adds no round trip.
	fresh := r.freshAPIReader()
	revocation := make(chan revocationRead, 1)
	go func() { revocation <- r.liveRevocation(ctx, fresh, cluster) }()
	live := &v1alpha1.GitOpsCluster{}
	if err := fresh.Get(ctx, types.NamespacedName{Namespace: owner.Namespace, Name: owner.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return reject(ReasonNotSelected, "GitOpsCluster %s/%s no longer exists", owner.Namespace, owner.Name), nil
		}
		return nil, err
	}
	if !live.DeletionTimestamp.IsZero() {
		return reject(ReasonNotSelected, "GitOpsCluster %s/%s is being deleted", owner.Namespace, owner.Name), nil
	}
	// The revocations of every principal were read, so an owner that moved to another
	// principal since the cache was read needs no second read.
	if rej, err := judgeRevocation(<-revocation, live, names.PrincipalNamespace(live), cluster); err != nil || rej != nil {
		return rej, err
	}
	selected, err := ownership.SelectsLive(ctx, r.Client, fresh, live.Namespace, live.Spec.PlacementRef.Name, cluster)
	if err != nil {
		return nil, err
	}
	if !selected {
		return reject(ReasonNotSelected,
			"cluster %q is no longer selected by Placement %s/%s of GitOpsCluster %s/%s", cluster,
			live.Namespace, live.Spec.PlacementRef.Name, live.Namespace, live.Name), nil
	}
	return nil, nil
}

// sharedRevocationsMax is the most AgentRevocations the hub may hold for the live revocation
// check to read them all in one list that concurrent requests share.
const sharedRevocationsMax = 32

// liveRevocation reads the AgentRevocations of cluster, on every principal, with a read that
// starts after the call. A renewal wave asks about thousands of clusters, nearly none of them
// revoked: while the cache shows few revocations on the hub, one list of them all (a page of
// sharedRevocationsMax, metadata only) answers every request recorded before it started,
// instead of one read per cluster. With more revocations, or a list that does not fit in a
// page, those named after the cluster are listed.
func (r *Reconciler) liveRevocation(ctx context.Context, fresh *freshReader, cluster string) revocationRead {
	newList := func() *metav1.PartialObjectMetadataList {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("AgentRevocationList"))
		return list
	}
	if r.fewRevocations(ctx) {
		list := newList()
		if err := fresh.ListPage(ctx, list, "", sharedRevocationsMax); err == nil && list.Continue == "" {
			return r.holding(list.Items, cluster)
		}
	}
	list := newList()
	if err := fresh.List(ctx, list, client.MatchingFields{"metadata.name": cluster}); err != nil {
		return revocationRead{err: err}
	}
	return r.holding(list.Items, cluster)
}

// holding returns the first of revs that revokes cluster: named after it, in a served
// namespace, not being lifted.
func (r *Reconciler) holding(revs []metav1.PartialObjectMetadata, cluster string) revocationRead {
	for i := range revs {
		if m := &revs[i]; m.Name == cluster && m.DeletionTimestamp.IsZero() && r.served(m.Namespace) {
			return revocationRead{rev: &v1alpha1.AgentRevocation{ObjectMeta: m.ObjectMeta}}
		}
	}
	return revocationRead{}
}

func (r *Reconciler) served(ns string) bool {
	return r.Config.NamespaceServed == nil || r.Config.NamespaceServed(ns)
}

// fewRevocations: the cache holds at most sharedRevocationsMax AgentRevocations on the hub.
// The cache only chooses which live read is made; the verdict always comes from that read.
func (r *Reconciler) fewRevocations(ctx context.Context) bool {
	var cached v1alpha1.AgentRevocationList
	if err := r.Client.List(ctx, &cached, client.Limit(sharedRevocationsMax+1), client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return len(cached.Items) <= sharedRevocationsMax
}

// expectation reads the owner's AddOnTemplate: the subject its CustomSigner registration asks
// OCM's agent to request, or OCM's default subject.
func (r *Reconciler) expectation(ctx context.Context, owner *v1alpha1.GitOpsCluster, cluster string, now time.Time) (Expectation, *Rejection, error) {
	name := names.TemplateName(owner)
	tpl := &addonv1alpha1.AddOnTemplate{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return Expectation{}, reject(ReasonNoTemplate,
				"AddOnTemplate %s of GitOpsCluster %s/%s does not exist; the GitOpsCluster controller writes it (see the GitOpsCluster's AddOnConfigured condition)",
				name, owner.Namespace, owner.Name), nil
		}
		return Expectation{}, nil, fmt.Errorf("reading AddOnTemplate %s: %w", name, err)
	}
	if tpl.Spec.AddonName != r.Config.AddonName {
		return Expectation{}, reject(ReasonNoTemplate, "AddOnTemplate %s is for addon %s, not %s",
			name, short(tpl.Spec.AddonName), r.Config.AddonName), nil
	}
	var reg *addonv1alpha1.CustomSignerRegistrationConfig
	for _, rs := range tpl.Spec.Registration {
		if rs.Type == addonv1alpha1.RegistrationTypeCustomSigner && rs.CustomSigner != nil && rs.CustomSigner.SignerName == r.Config.SignerName {
			reg = rs.CustomSigner
			break
		}
	}
	if reg == nil {
		return Expectation{}, reject(ReasonNoTemplate, "AddOnTemplate %s has no CustomSigner registration with signer %s",
			name, r.Config.SignerName), nil
	}
	exp := DefaultExpectation(r.Config.SignerName, cluster, r.Config.AddonName)
	if s := reg.Subject; s != nil {
		// Whoever may edit AddOnTemplates could name another agent's identity here; the
		// subject is derived from the cluster that asks, never read from the template.
		return Expectation{}, reject(ReasonTemplateSubject,
			"AddOnTemplate %s names certificate subject user %q; this signer issues only the subject it derives for the cluster (%s), so remove the subject from the template's registration",
			name, short(s.User), exp.CommonName), nil
	}
	exp.MaxAge = r.Config.MaxCSRAge
	exp.Now = now
	return exp, nil, nil
}

// signingCA reads the owner's hub CA.
func (r *Reconciler) signingCA(ctx context.Context, principalNS string, owner *v1alpha1.GitOpsCluster) (*pki.KeyPair, *Rejection, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: principalNS, Name: names.CASecretName}
	err := r.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		// The cache may hold only the project's own Secrets; a CA a user put in place is
		// read live.
		err = r.APIReader.Get(ctx, key, s)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reject(ReasonCAUnavailable,
				"the hub CA secret %s/%s of GitOpsCluster %s/%s does not exist; the GitOpsCluster controller creates it (see its CertificatesReady condition)",
				principalNS, names.CASecretName, owner.Namespace, owner.Name), nil
		}
		return nil, nil, fmt.Errorf("reading CA secret %s/%s: %w", principalNS, names.CASecretName, err)
	}
	ca, err := pki.ParseKeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, reject(ReasonCAUnavailable, "the hub CA secret %s/%s cannot be used: %v", principalNS, names.CASecretName, err), nil
	}
	return ca, nil, nil
}

// MaxValidity is the longest agent certificate the signer issues, whatever the GitOpsCluster
// says: the CRD caps clientCertificateValidity at the same value, but a CRD left from an older
// release (Helm does not upgrade CRDs) may not, and a certificate that cannot be recalled
// everywhere must not outlive a month.
const MaxValidity = 720 * time.Hour

// validity is the owner's clientCertificateValidity, else the default, at most MaxValidity; a
// shorter spec.expirationSeconds asked for by the requester wins, as with Kubernetes' own
// signers.
func (r *Reconciler) validity(owner *v1alpha1.GitOpsCluster, csr *certificatesv1.CertificateSigningRequest) time.Duration {
	v := r.Config.DefaultValidity
	if cv := owner.Spec.ArgoCDAgentAddon.ClientCertificateValidity; cv != nil && cv.Duration > 0 {
		v = cv.Duration
	}
	v = min(v, MaxValidity)
	if es := csr.Spec.ExpirationSeconds; es != nil && *es > 0 {
		if asked := time.Duration(*es) * time.Second; asked < v {
			v = asked
		}
	}
	return v
}

// IssueCertificate signs a request that CheckCSR accepted: the request's exact subject and
// DNS SANs, ClientAuth only, NotAfter never past the CA's. It returns the leaf as PEM.
func IssueCertificate(ca *pki.KeyPair, req *x509.CertificateRequest, validity time.Duration, now time.Time) ([]byte, *x509.Certificate, error) {
	return ca.SignClientCertificate(req.PublicKey, req.Subject, req.DNSNames, validity, now)
}

// issue signs, approves, records and publishes the certificate. A Rejection is returned when
// the CA cannot sign; an error when a write failed (the whole step is retried, and a retry
// after a partial success signs again: only a published certificate counts).
func (r *Reconciler) issue(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d *decision, now time.Time) (*Rejection, error) {
	certPEM, cert, err := IssueCertificate(d.ca, d.request, d.validity, now)
	if err != nil {
		return reject(ReasonCAUnavailable, "the hub CA in %s/%s cannot sign: %v",
			names.PrincipalNamespace(d.owner), names.CASecretName, err), nil
	}
	if !isApproved(csr) {
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           certificatesv1.CertificateApproved,
			Status:         corev1.ConditionTrue,
			Reason:         ReasonApproved,
			Message:        fmt.Sprintf("the argocd-agent client certificate request of cluster %s passed every check", d.cluster),
			LastUpdateTime: metav1.NewTime(now),
		})
		if err := r.Client.SubResource("approval").Update(ctx, csr); err != nil {
			return nil, fmt.Errorf("approving CSR %s: %w", csr.Name, err)
		}
	}
	// Record before publishing: a certificate that exists must be revocable.
	store := ledger.Store{Client: r.Client, Reader: r.APIReader, Cache: r.Client, Namespace: names.PrincipalNamespace(d.owner)}
	owner := ledger.Owner{Namespace: d.owner.Namespace, Name: d.owner.Name}
	if err := store.Record(ctx, d.cluster, owner, cert, r.Config.MaxCertificatesPerCluster, now); err != nil {
		if errors.Is(err, ledger.ErrTooManyCertificates) {
			return reject(ReasonTooManyCertificates, "%v; requests are refused until older certificates expire (manager flag --max-certificates-per-cluster)", err), nil
		}
		return nil, fmt.Errorf("recording the certificate issued for cluster %s: %w", d.cluster, err)
	}
	// A revocation may have run between the checks and the record; it would not have seen
	// this certificate. Check again now that it is recorded: if the cluster lost its right,
	// the certificate is never published (and the reconciler revokes the new record).
	if rej, err := r.stillEntitled(ctx, d.cluster, d.owner); err != nil || rej != nil {
		return rej, err
	}
	csr.Status.Certificate = certPEM
	if err := r.Client.Status().Update(ctx, csr); err != nil {
		return nil, fmt.Errorf("publishing the certificate of CSR %s: %w", csr.Name, err)
	}
	// No Event for a certificate issued: the CSR carries it, the log and the metric count it,
	// and a renewal wave would otherwise add one API write per CSR. Refusals get one.
	csrTotal.WithLabelValues(ResultSigned, ReasonSigned).Inc()
	log.FromContext(ctx).Info("signed argocd-agent client certificate", "cluster", d.cluster,
		"owner", d.owner.Namespace+"/"+d.owner.Name, "fingerprint", pki.Fingerprint(cert), "notAfter", cert.NotAfter)
	return nil, nil
}

// fail marks the CSR Failed with the rejection; the agent has to make a new CSR.
func (r *Reconciler) fail(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d *decision, now time.Time) error {
	rej := d.rejection
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:           certificatesv1.CertificateFailed,
		Status:         corev1.ConditionTrue,
		Reason:         rej.Reason,
		Message:        rej.Message,
		LastUpdateTime: metav1.NewTime(now),
	})
	if err := r.Client.Status().Update(ctx, csr); err != nil {
		return fmt.Errorf("marking CSR %s failed (%s): %w", csr.Name, rej.Reason, err)
	}
	csrTotal.WithLabelValues(ResultRejected, rej.Reason).Inc()
	log.FromContext(ctx).Info("refused argocd-agent client certificate request", "cluster", d.cluster,
		"user", csr.Spec.Username, "reason", rej.Reason, "message", rej.Message)
	r.event(csr, d.owner, corev1.EventTypeWarning, rej.Reason, "refused: "+rej.Message)
	return nil
}

func (r *Reconciler) event(csr *certificatesv1.CertificateSigningRequest, related *v1alpha1.GitOpsCluster, eventType, reason, note string) {
	if r.Recorder == nil {
		return
	}
	if related == nil {
		r.Recorder.Eventf(csr, nil, eventType, reason, "Sign", "%s", note)
		return
	}
	r.Recorder.Eventf(csr, related, eventType, reason, "Sign", "%s", note)
}

// revoked refuses cluster when an AgentRevocation names it on any principal the manager
// serves (a revocation follows the cluster to every principal), or when owner lists it in
// spec.revokedClusters (before the manager has made the revocation). The cache decides here.
func (r *Reconciler) revoked(ctx context.Context, owner *v1alpha1.GitOpsCluster, principalNS, cluster string) (*Rejection, error) {
	var revs v1alpha1.AgentRevocationList
	if err := r.Client.List(ctx, &revs, client.UnsafeDisableDeepCopy); err != nil {
		return judgeRevocation(revocationRead{err: err}, owner, principalNS, cluster)
	}
	metas := make([]metav1.PartialObjectMetadata, 0, len(revs.Items))
	for i := range revs.Items {
		if revs.Items[i].Name == cluster {
			metas = append(metas, metav1.PartialObjectMetadata{ObjectMeta: revs.Items[i].ObjectMeta})
		}
	}
	return judgeRevocation(r.holding(metas, cluster), owner, principalNS, cluster)
}

// revocationRead is the outcome of reading a cluster's AgentRevocations: the one that holds
// (nil when none does), or the read's error.
type revocationRead struct {
	rev *v1alpha1.AgentRevocation
	err error
}

// judgeRevocation refuses cluster when read found an AgentRevocation that holds, or owner
// lists it in spec.revokedClusters. One being deleted is being lifted: the lift deletes the
// refused requests, and the one OCM's agent makes next must not be refused again, unless
// another revocation still holds.
func judgeRevocation(read revocationRead, owner *v1alpha1.GitOpsCluster, principalNS, cluster string) (*Rejection, error) {
	if read.err != nil {
		return nil, fmt.Errorf("reading the AgentRevocations of cluster %s: %w", cluster, read.err)
	}
	if rev := read.rev; rev != nil {
		return reject(ReasonRevoked, "cluster %q is revoked by AgentRevocation %s/%s, which holds on every principal of the hub; "+
			"whoever may delete AgentRevocations there lifts it, and the agent then gets a certificate for a new key", cluster, rev.Namespace, rev.Name), nil
	}
	if slices.Contains(owner.Spec.RevokedClusters, cluster) {
		return reject(ReasonRevoked, "GitOpsCluster %s/%s lists cluster %q in spec.revokedClusters; the revocation lasts until AgentRevocation %s/%s is deleted",
			owner.Namespace, owner.Name, cluster, principalNS, cluster), nil
	}
	return nil, nil
}

// atCertificateCap refuses cluster when its ledger on the principal (as the cache holds it)
// already lists MaxCertificatesPerCluster unexpired certificates.
func (r *Reconciler) atCertificateCap(ctx context.Context, principalNS, cluster string, now time.Time) (*Rejection, error) {
	maxCerts := r.Config.MaxCertificatesPerCluster
	if maxCerts <= 0 {
		return nil, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: principalNS, Name: ledger.LedgerName(cluster)}, cm); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if n := len(ledger.ParseEntries(cm.Data, now)); n >= maxCerts {
		return reject(ReasonTooManyCertificates, "cluster %s holds %d unexpired certificates (the maximum is %d); requests are refused until older certificates expire (manager flag --max-certificates-per-cluster)",
			cluster, n, maxCerts), nil
	}
	return nil, nil
}
