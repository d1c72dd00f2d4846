// Package setup wires the basic pull model's controllers into the manager: when the hub
// serves Argo CD's Application API, at start-up or as soon as it appears.
package setup

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	reportv1alpha1 "github.com/argocd-agent-addon/argocd-agent-addon/apis/appsetreport/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/report"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/status"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/warmcache"
)

// Config configures the basic pull model.
type Config struct {
	// Enabled runs it when the hub serves Argo CD's Application API.
	Enabled bool
	// Concurrency is how many Applications the propagation and status controllers each
	// reconcile at once.
	Concurrency int
	// SweepInterval is how often ManifestWorks are checked for a live hub Application, behind
	// the event-driven cleanup.
	SweepInterval time.Duration
	// DetectInterval is how often a hub without Argo CD's Application API is asked again: three
	// discovery reads, cheap enough to ask often, so that the pull model starts soon after a
	// person installs Argo CD.
	DetectInterval time.Duration
	// Policy is what the hub operator allows the pull model to deliver: from which hub
	// namespaces, checked against which AppProjects, into which spoke namespace.
	Policy propagation.Policy
	// SealSecret is the Secret holding the key that seals the pull model's ManifestWorks;
	// the manager creates it when it is missing.
	SealSecret types.NamespacedName
	// OfflineRelease is how long a deleted hub Application waits for its ManifestWork's deletion
	// while the cluster is unavailable before its finalizer is released anyway; 0 waits for
	// the cluster however long it takes.
	OfflineRelease time.Duration
	// RegistrationGrace is how long an ArgoCDClusterRegistration keeps the secret of a cluster
	// that left its Placement while OCM marks it unreachable or unavailable; 0 keeps none.
	RegistrationGrace time.Duration
}

// DefaultRegistrationGrace covers a klusterlet or node restart, a network cut and most
// maintenance windows; MaxRegistrationGrace bounds how long a dead cluster stays registered.
const (
	DefaultRegistrationGrace = time.Hour
	MaxRegistrationGrace     = 30 * 24 * time.Hour
)

// DefaultSealSecretName is the name of the sealing key's Secret.
const DefaultSealSecretName = "argocd-agent-addon-pull-model-seal"

// DefaultConfig returns the defaults: on, 16 at a time (the benchmark delivers 5,000 Applications
// in 36 s with 16, 48 s with 4), a sweep every 10 minutes.
func DefaultConfig() Config {
	return Config{
		Enabled: true, Concurrency: 16, SweepInterval: 10 * time.Minute, DetectInterval: 10 * time.Second, OfflineRelease: 5 * time.Minute,
		RegistrationGrace: DefaultRegistrationGrace,
		Policy:            propagation.DefaultPolicy(),
		SealSecret:        types.NamespacedName{Namespace: seal.OwnNamespace(), Name: DefaultSealSecretName},
	}
}

// Validate reports settings the manager must not start with.
func (c Config) Validate() error {
	if c.Concurrency < 1 {
		return fmt.Errorf("--pull-model-concurrency must be at least 1, got %d", c.Concurrency)
	}
	if c.OfflineRelease < 0 {
		return fmt.Errorf("--pull-model-offline-release-after must not be negative, got %s", c.OfflineRelease)
	}
	if c.RegistrationGrace < 0 || c.RegistrationGrace > MaxRegistrationGrace {
		return fmt.Errorf("--pull-model-registration-grace must be between 0 and %s, got %s (a Placement toleration keeps a cluster selected however long it is down)", MaxRegistrationGrace, c.RegistrationGrace)
	}
	if c.SealSecret.Namespace == "" || c.SealSecret.Name == "" {
		return fmt.Errorf("--pull-model-seal-secret must be <namespace>/<name>, got %q", c.SealSecret.String())
	}
	return c.Policy.Validate()
}

// MetricEnabled is 1 while the pull-model controllers run, else 0.
const MetricEnabled = "argocd_agent_addon_pull_model_enabled"

var enabledGauge = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: MetricEnabled,
	Help: "1 while the basic pull model's controllers run (the hub serves Argo CD's Application API and --pull-model is on), else 0.",
})

func init() { metrics.Registry.MustRegister(enabledGauge) }

// CacheByObject is the scope of the pull model's own cache: only Applications carrying the
// pull label, only ManifestWorks carrying it (both compacted, see pullmodel.CompactApplication
// and pullmodel.CompactWork), ApplicationSets as metadata only, the reports, the AppProjects of
// the hub Argo CD namespace, and the cluster sets and their bindings. It is
// a cache of its own, made once the hub serves these kinds, so that a hub without Argo CD (or
// a manager with --pull-model=false) never asks for them.
func CacheByObject(cfg Config) map[client.Object]cache.ByObject {
	has := func(key string) labels.Selector {
		req, err := labels.NewRequirement(key, selection.Exists, nil)
		if err != nil {
			panic(err)
		}
		return labels.NewSelector().Add(*req)
	}
	return map[client.Object]cache.ByObject{
		pullmodel.NewApplication():                         {Label: has(pullmodel.LabelPull), Transform: pullmodel.CompactApplication},
		&workv1.ManifestWork{}:                             {Label: has(pullmodel.LabelPull), Transform: pullmodel.CompactWork},
		report.NewApplicationSetMetadata():                 {},
		&reportv1alpha1.MulticlusterApplicationSetReport{}: {},
		propagation.NewAppProject():                        {Namespaces: map[string]cache.Config{cfg.Policy.ArgoCDNamespace: {}}},
		&clusterv1beta2.ManagedClusterSet{}:                {},
		&clusterv1beta2.ManagedClusterSetBinding{}:         {},
	}
}

// Setup starts the pull-model controllers with the manager when the hub has Argo CD's
// Application API; otherwise it says so and starts them once the API appears.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	log := ctrl.Log.WithName("pullmodel")
	if !cfg.Enabled {
		log.Info("the basic pull model is off (--pull-model=false)")
		return nil
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	served, err := applicationsServed(dc)
	if err != nil {
		return err
	}
	if served {
		return start(ctx, mgr, cfg, true)
	}
	log.Info("the basic pull model waits: this hub does not serve Argo CD's Application and ApplicationSet APIs (argoproj.io/v1alpha1) and OCM's ManifestWork API; install Argo CD's CRDs and it starts without a restart")
	return mgr.Add(&detector{mgr: mgr, cfg: cfg, dc: dc})
}

// applicationsServed reports whether the hub serves every kind the pull model reads.
func applicationsServed(dc discovery.DiscoveryInterface) (bool, error) {
	for gv, names := range map[string][]string{
		pullmodel.ArgoGroupVersion.String():  {"applications", "applicationsets", "appprojects"},
		workv1.GroupVersion.String():         {"manifestworks"},
		reportv1alpha1.GroupVersion.String(): {"multiclusterapplicationsetreports"},
	} {
		res, err := dc.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("asking the hub for %s: %w", gv, err)
		}
		served := map[string]bool{}
		for _, r := range res.APIResources {
			served[r.Name] = true
		}
		for _, n := range names {
			if !served[n] {
				return false, nil
			}
		}
	}
	return true, nil
}

// CacheOptions are the options of the pull model's cache: its kinds and scope (CacheByObject)
// and nothing else, read through the manager's REST mapper and HTTP client.
func CacheOptions(cfg Config, scheme *runtime.Scheme, mapper meta.RESTMapper, httpClient *http.Client) cache.Options {
	return cache.Options{
		Scheme:     scheme,
		Mapper:     mapper,
		HTTPClient: httpClient,
		ByObject:   CacheByObject(cfg),
		// Only the kinds above: a read of anything else is a bug, not a new cluster-wide watch.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
	}
}

// start makes the pull model's cache and registers its indexes and controllers; it works
// before and after the manager starts (beforeStart says which). Started with the manager, the
// cache's informers start with it and the manager is ready once they have synced.
func start(ctx context.Context, mgr ctrl.Manager, cfg Config, beforeStart bool) error {
	c, err := cache.New(mgr.GetConfig(), CacheOptions(cfg, mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient()))
	if err != nil {
		return fmt.Errorf("pull model cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	if err := pullmodel.SetupIndexes(ctx, c); err != nil {
		return fmt.Errorf("pull model indexes: %w", err)
	}
	if beforeStart {
		if err := warmcache.Warm(ctx, mgr, "pull-model-cache", c, slices.Collect(maps.Keys(CacheByObject(cfg)))...); err != nil {
			return fmt.Errorf("pull model cache: %w", err)
		}
	}
	key, err := seal.LoadOrCreateKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), cfg.SealSecret)
	if err != nil {
		return err
	}
	sealer, err := seal.New(key)
	if err != nil {
		return err
	}
	if err := (&propagation.Reconciler{Client: mgr.GetClient(), Cache: c, Concurrency: cfg.Concurrency, SweepInterval: cfg.SweepInterval, Policy: cfg.Policy, Sealer: sealer, OfflineRelease: cfg.OfflineRelease}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up pull-model propagation: %w", err)
	}
	if err := (&status.Reconciler{Client: mgr.GetClient(), Cache: c, Concurrency: cfg.Concurrency, Sealer: sealer}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up pull-model status: %w", err)
	}
	if err := (&report.Reconciler{Client: mgr.GetClient(), Cache: c, Sealer: sealer}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the ApplicationSet report: %w", err)
	}
	enabledGauge.Set(1)
	ctrl.Log.WithName("pullmodel").Info("the basic pull model runs: marked Applications are delivered as ManifestWorks")
	return nil
}

// detector asks the hub for Argo CD's Application API until it is served, then starts the
// pull-model controllers in the running manager.
type detector struct {
	mgr ctrl.Manager
	cfg Config
	dc  discovery.DiscoveryInterface
}

// NeedLeaderElection: the controllers it starts need it, and only the leader must start them.
func (d *detector) NeedLeaderElection() bool { return true }

func (d *detector) Start(ctx context.Context) error {
	enabledGauge.Set(0)
	t := time.NewTicker(d.cfg.DetectInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		served, err := applicationsServed(d.dc)
		if err != nil {
			ctrl.Log.WithName("pullmodel").Error(err, "checking for Argo CD's Application API")
			continue
		}
		if served {
			return start(ctx, d.mgr, d.cfg, false)
		}
	}
}
