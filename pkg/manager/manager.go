// Package manager assembles the hub controllers into one controller-runtime manager.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleetmetrics"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/clustersecrets"
	gitopsconfig "github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/revocation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/namespaceindex"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/clusters"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/warmcache"
)

// Options are the manager's process-level settings, bound to command-line flags.
type Options struct {
	MetricsAddr string
	// MetricsSecure serves /metrics over HTTPS and only to callers whose bearer token the API
	// server authenticates (TokenReview) and authorizes for get on /metrics
	// (SubjectAccessReview). Off, /metrics is plain HTTP and open to anyone who reaches it.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint; when empty or
	// without them, a self-signed certificate is generated in memory at start-up.
	MetricsCertDir string
	// EnableHTTP2 lets the metrics endpoint speak HTTP/2. Off by default, as in kubebuilder
	// projects: HTTP/2 stream-reset floods (CVE-2023-44487) cost the server far more than the
	// client, and a scraper gains nothing from it.
	EnableHTTP2 bool
	// PprofAddr serves net/http/pprof when set; only loopback addresses are accepted, since
	// profiles expose memory contents and pprof has no authentication.
	PprofAddr               string
	HealthProbeAddr         string
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are the leader-election timings: how long a
	// standby waits before taking over a lease not renewed, how long the leader keeps trying to
	// renew before it gives up leadership, and how often both try.
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	GracefulShutdownTimeout time.Duration
	// GitOpsClusterConcurrency and SignerConcurrency are how many GitOpsClusters and CSRs are
	// reconciled at once; one object is never reconciled twice at the same time.
	GitOpsClusterConcurrency int
	SignerConcurrency        int
	// Fleet configures the GitOpsCluster reconciler.
	Fleet gitopsconfig.Config
	// Signer configures the CSR signer; its signer and addon names are taken from Fleet, so
	// the two never disagree.
	Signer signer.Config
	// PullModel configures the basic pull model (Applications delivered as ManifestWorks).
	PullModel pullmodelsetup.Config
}

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:      ":8443",
		MetricsSecure:    true,
		HealthProbeAddr:  ":8081",
		LeaderElectionID: "argocd-agent-addon.apps.open-cluster-management.io",
		// The timings of OCM's own hub controllers (library-go's defaults): the leader keeps
		// its lease through about 80 s of API server downtime (an upgrade, a restart, a stall
		// under load) instead of exiting after 10 s as with controller-runtime's 15s/10s/2s.
		// A standby tries every 26 to 31 s (client-go's jitter), so it takes over a crashed
		// leader within about 170 s, and one shut down cleanly (the lease released) within 31 s.
		LeaseDuration:           137 * time.Second,
		RenewDeadline:           107 * time.Second,
		RetryPeriod:             26 * time.Second,
		GracefulShutdownTimeout: 30 * time.Second,
		// GitOpsClusters share the ClusterManagementAddOn and principal namespaces, so one at a
		// time avoids write conflicts between them; CSR signing is independent per request
		// (the certificate ledger is updated with optimistic locking) and arrives in bursts
		// when many clusters renew together. A CSR waits on six API calls one after another,
		// so the signer's pace is its workers over that latency: in a renewal wave of 5,000
		// (`make bench-fleet`) 16 workers signed 46/s and 64 signed 81/s on the same hub.
		GitOpsClusterConcurrency: 1,
		SignerConcurrency:        64,
		Fleet:                    gitopsconfig.Default(),
		Signer:                   signer.DefaultConfig(),
		PullModel:                pullmodelsetup.DefaultConfig(),
	}
}

// Validate rejects settings the manager must not start with.
func (o Options) Validate() error {
	var errs []error
	if err := checkLoopback(o.PprofAddr); err != nil {
		errs = append(errs, fmt.Errorf("--pprof-bind-address: %w", err))
	}
	if o.GitOpsClusterConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--gitopscluster-concurrency must be at least 1, got %d", o.GitOpsClusterConcurrency))
	}
	if err := o.PullModel.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.SignerConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--signer-concurrency must be at least 1, got %d", o.SignerConcurrency))
	}
	// client-go's leader elector refuses these only when leader election starts (it needs the
	// renew deadline past the retry period with its jitter); say so before anything runs.
	if o.RetryPeriod <= 0 || o.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(o.RetryPeriod)) || o.LeaseDuration <= o.RenewDeadline {
		errs = append(errs, fmt.Errorf("leader election needs lease duration > renew deadline > %.1f × retry period > 0, got %s, %s, %s",
			leaderelection.JitterFactor, o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	if err := o.Fleet.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Fleet.CertManagerRecheck < 0 {
		errs = append(errs, fmt.Errorf("--cert-manager-recheck must not be negative, got %s", o.Fleet.CertManagerRecheck))
	}
	if r := o.Fleet.SpokeImageRegistry; r != "" && !spokeRegistryPattern.MatchString(r) {
		errs = append(errs, fmt.Errorf("--spoke-image-registry %q is not a registry host[:port][/path]", r))
	}
	for _, n := range o.Fleet.SpokeImagePullSecrets {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--spoke-image-pull-secrets: %q is not a Secret name: %s", n, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// spokeRegistryPattern is a registry host with an optional port and path: the value lands in
// image references on every cluster, unescaped.
var spokeRegistryPattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$`)

// checkLoopback accepts "" and "0" (off) and host:port addresses whose host is localhost or
// a loopback IP. A bare ":port" listens on every interface, so it is refused too.
func checkLoopback(addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address; pprof has no authentication, so only 127.0.0.1, [::1] or localhost are allowed (reach it with kubectl port-forward)", addr)
}

// GroupKindConcurrency maps the kinds the hub controllers reconcile to their concurrency, in
// the form controller-runtime looks them up (Kind.group).
func GroupKindConcurrency(opts Options) map[string]int {
	return map[string]int{
		v1alpha1.GroupVersion.WithKind("GitOpsCluster").GroupKind().String():                         opts.GitOpsClusterConcurrency,
		certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest").GroupKind().String(): opts.SignerConcurrency,
	}
}

// MetricsOptions are the metrics server's options: authenticated and authorized HTTPS unless
// MetricsSecure is off.
func MetricsOptions(opts Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if opts.MetricsSecure {
		m.SecureServing = true
		m.CertDir = opts.MetricsCertDir
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
		if !opts.EnableHTTP2 {
			m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
		}
	}
	return m
}

// NewScheme returns a scheme with every API the hub controllers read or write.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		v1alpha1.AddToScheme,
		clusterv1.Install,
		clusterv1beta1.Install,
		clusterv1beta2.Install,
		addonv1alpha1.Install,
		workv1.Install,
		// cert-manager's kinds are known to the client whether or not the hub serves them;
		// they are read only for principals that name a cert-manager issuer.
		cmapi.AddToScheme,
		reportv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Setup registers the field indexes and every hub controller with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := ownership.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := (&gitopscluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Fleet}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the GitOpsCluster controller: %w", err)
	}
	if err := (&revocation.Enforcer{Hub: gitopsconfig.Hub{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Config: opts.Fleet}}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the AgentRevocation controller: %w", err)
	}
	if err := (&revocation.BlocklistKeeper{Hub: gitopsconfig.Hub{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Config: opts.Fleet}}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the blocklist keeper: %w", err)
	}
	if err := (&revocation.CertificateRecorder{Hub: gitopsconfig.Hub{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Config: opts.Fleet}}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the cluster secret certificate recorder: %w", err)
	}
	if err := clustersecrets.SetupLabelSync(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the agent cluster label sync: %w", err)
	}
	if err := clusters.Setup(ctx, mgr, opts.Fleet.ManagedNamespaces, opts.PullModel.RegistrationGrace); err != nil {
		return fmt.Errorf("setting up cluster registration: %w", err)
	}
	if err := fleetmetrics.Setup(mgr, opts.Fleet); err != nil {
		return fmt.Errorf("setting up the fleet metrics: %w", err)
	}
	sc := opts.Signer
	sc.SignerName, sc.AddonName = opts.Fleet.SignerName, opts.Fleet.AddonName
	sc.NamespaceServed = opts.Fleet.NamespaceManaged
	if err := (&signer.Reconciler{Config: sc}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CSR signer: %w", err)
	}
	return pullmodelsetup.Setup(ctx, mgr, opts.PullModel)
}

// WatchedObjects are the kinds the hub controllers watch through the manager's cache: those
// CacheOptions scopes, and those it caches whole. Run creates their informers before the
// controllers start, so that its readiness covers them; test/chart checks that no controller
// opens a watch after it.
func WatchedObjects(opts Options) []client.Object {
	return append(slices.Collect(maps.Keys(CacheOptions(opts).ByObject)),
		&v1alpha1.GitOpsCluster{}, &v1alpha1.AgentRevocation{}, &v1alpha1.ArgoCDClusterRegistration{},
		&clusterv1beta1.Placement{}, &clusterv1beta1.PlacementDecision{},
		&addonv1alpha1.AddOnTemplate{}, &addonv1alpha1.AddOnDeploymentConfig{}, &corev1.Node{})
}

// ClientOptions are the manager client's options. Every read that must not be stale (ledgers
// before a revocation, the CSR being signed) goes through the API reader explicitly.
func ClientOptions() client.Options {
	return client.Options{}
}

// CacheOptions cache only what the hub controllers read: this signer's CSRs, this addon's
// ManagedClusterAddOns, this project's ConfigMaps, the principal's Deployment and Service by
// name, and Secrets in the managed namespaces (or, with none, only the project's own Secrets).
func CacheOptions(opts Options) cache.Options {
	keepAll := func(o any) (any, error) { return o, nil }
	byName := func(name string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", name) }
	byObject := map[client.Object]cache.ByObject{
		&certificatesv1.CertificateSigningRequest{}: {Field: fields.OneTermEqualSelector("spec.signerName", opts.Fleet.SignerName), Transform: TrimCertificateSigningRequest},
		// Only this addon's ManagedClusterAddOns: a hub carries one per addon per cluster.
		&addonv1alpha1.ManagedClusterAddOn{}: {Field: byName(opts.Fleet.AddonName)},
		// The reconciler tells its own server-side-apply entry by the CMA's managed fields. All
		// CMAs (one per addon on the hub, a handful): the agent's and the Argo CD components'.
		&addonv1alpha1.ClusterManagementAddOn{}: {Transform: keepAll},
		// Every ManagedCluster, but only what is read of it.
		&clusterv1.ManagedCluster{}: {Transform: TrimManagedCluster},
		// Only the probes that look for an Argo CD before the components go to a cluster, and of
		// them only what is read.
		&workv1.ManifestWork{}: {Label: spoke.ProbeSelector(), Transform: spoke.TrimProbe},
	}
	// Only this project's ConfigMaps (ledgers, revocation record): a hub has many others.
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})}
	// Only the principal's Deployment and Service are read, by name.
	deployments := cache.ByObject{Field: byName(opts.Fleet.PrincipalDeploymentName)}
	services := cache.ByObject{Field: byName(opts.Fleet.PrincipalServiceName)}
	// Without managed namespaces a principal may live in any namespace, and caching every
	// Secret of the hub would hold every Helm release and token in memory: only the
	// project's own Secrets are cached, and a CA a user put in place is read live.
	secrets := cache.ByObject{Label: ours.Label}
	// With managed namespaces, Secrets, Deployments and ConfigMaps are watched only there, so
	// the manager needs no cluster-wide access to them.
	if nss := opts.Fleet.ManagedNamespaces; len(nss) > 0 {
		only := map[string]cache.Config{}
		for _, ns := range nss {
			only[ns] = cache.Config{}
		}
		secrets = cache.ByObject{Namespaces: only}
		byObject[&v1alpha1.AgentRevocation{}] = cache.ByObject{Namespaces: only}
		deployments.Namespaces = only
		services.Namespaces = only
		ours.Namespaces = only
	}
	// Set once each: the map is keyed by pointer, so a second &corev1.ConfigMap{} would be
	// another entry for the same kind, and controller-runtime would keep either one at random.
	secrets.Transform = TrimSecret
	byObject[&corev1.Secret{}] = secrets
	byObject[&appsv1.Deployment{}] = deployments
	byObject[&corev1.Service{}] = services
	byObject[&corev1.ConfigMap{}] = ours
	// Managed fields are most of a cached object's size and nothing else here reads them.
	strip := cache.TransformStripManagedFields()
	for o, by := range byObject {
		if by.Transform == nil {
			by.Transform = strip
		}
		by.Transform = shareStrings(by.Transform)
		byObject[o] = by
	}
	return cache.Options{ByObject: byObject, DefaultTransform: shareStrings(strip), NewInformer: namespaceindex.Without(UnindexedByNamespace...)}
}

// UnindexedByNamespace are the cached kinds with an object in each cluster's namespace that
// are only ever listed cluster-wide: their informers have no namespace index.
var UnindexedByNamespace = []runtime.Object{&addonv1alpha1.ManagedClusterAddOn{}, &workv1.ManifestWork{}}

// TrimSecret drops managed fields and keeps agent cluster secrets in their compact form
// (agentsecret.Compact): the certificate's identity, not its key material.
func TrimSecret(o any) (any, error) {
	if s, ok := o.(*corev1.Secret); ok {
		s.ManagedFields = nil
	}
	return agentsecret.Compact(o)
}

// TrimManagedCluster keeps of a ManagedCluster what the controllers read: its metadata (labels
// select clusters), its spec's acceptance and its conditions. Status capacity, claims and the
// client configs with their CA bundles are most of its size. Objects from this cache are
// never written back.
func TrimManagedCluster(o any) (any, error) {
	mc, ok := o.(*clusterv1.ManagedCluster)
	if !ok {
		return o, nil
	}
	mc.ManagedFields = nil
	mc.Spec.ManagedClusterClientConfigs = nil
	mc.Status = clusterv1.ManagedClusterStatus{Conditions: mc.Status.Conditions}
	return mc, nil
}

// TrimCertificateSigningRequest drops from a CSR the signer is done with (issued, denied or
// failed) what only an open request needs: the request, the requester and its groups, extra
// and usages, the annotations, the conditions' messages, and the issued certificate, which is
// kept as a one-byte stand-in so that the CSR still reads as issued. What is read of a final
// CSR stays: its name, labels, signer and the conditions' types, statuses and reasons. After a
// renewal wave the cache holds one finished CSR per cluster until kube-controller-manager's
// cleaner deletes it an hour later. Objects from this cache are never written back once final.
func TrimCertificateSigningRequest(o any) (any, error) {
	csr, ok := o.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return o, nil
	}
	csr.ManagedFields = nil
	if !signer.IsFinal(csr) {
		return csr, nil
	}
	csr.Annotations = nil
	signerName := csr.Spec.SignerName
	csr.Spec = certificatesv1.CertificateSigningRequestSpec{SignerName: signerName}
	for i := range csr.Status.Conditions {
		csr.Status.Conditions[i].Message = ""
	}
	if len(csr.Status.Certificate) > 0 {
		csr.Status.Certificate = issuedStandIn
	}
	return csr, nil
}

// issuedStandIn replaces an issued certificate in the cache; shared, since nothing reads it.
var issuedStandIn = []byte{'-'}

// ControllerOptions are the controller-runtime manager options the binary runs with; tests
// build their managers from them too, so they see the cache a user runs.
func ControllerOptions(scheme *runtime.Scheme, opts Options) ctrl.Options {
	shutdown := opts.GracefulShutdownTimeout
	lease, renew, retry := opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod
	return ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 MetricsOptions(opts),
		HealthProbeBindAddress:  opts.HealthProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
		// Give up leadership on exit so a standby replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
		// The controllers are built with the builder's For(), which takes their concurrency
		// from here.
		Controller:     config.Controller{GroupKindConcurrency: GroupKindConcurrency(opts)},
		Client:         ClientOptions(),
		Cache:          CacheOptions(opts),
		MapperProvider: NewRESTMapper,
	}
}

// Run starts the hub controllers and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ControllerOptions(scheme, opts))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	warnings, err := CheckCRDs(ctx, mgr.GetRESTMapper(), mgr.GetAPIReader(), opts.PullModel.Enabled)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		ctrl.Log.WithName("manager").Error(nil, w)
	}
	if err := Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once every informer the controllers watch through the main cache has synced: they
	// are created here, so that they start with the cache rather than with the controllers.
	if err := warmcache.Warm(ctx, mgr, "readyz", mgr.GetCache(), WatchedObjects(opts)...); err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("starting hub controllers")
	return mgr.Start(ctx)
}
