// Package manager assembles the hub controllers into one controller-runtime manager.
package manager

import (
	"context"
	"fmt"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
)

// Options are the manager's process-level settings, bound to command-line flags.
type Options struct {
	MetricsAddr             string
	HealthProbeAddr         string
	LeaderElection          bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	GracefulShutdownTimeout time.Duration
	// Fleet configures the GitOpsCluster reconciler.
	Fleet gitopscluster.Config
	// Signer configures the CSR signer; its signer and addon names are taken from Fleet, so
	// the two never disagree.
	Signer signer.Config
}

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:             ":8080",
		HealthProbeAddr:         ":8081",
		LeaderElectionID:        "argocd-agent-addon.apps.open-cluster-management.io",
		GracefulShutdownTimeout: 30 * time.Second,
		Fleet:                   gitopscluster.DefaultConfig(),
		Signer:                  signer.DefaultConfig(),
	}
}

// NewScheme returns a scheme with every API the hub controllers read or write.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		v1alpha1.AddToScheme,
		clusterv1.Install,
		clusterv1beta1.Install,
		addonv1alpha1.Install,
		workv1.Install,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Setup registers the field indexes and every hub controller with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := fleet.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := (&gitopscluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Config: opts.Fleet}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the GitOpsCluster controller: %w", err)
	}
	sc := opts.Signer
	sc.SignerName, sc.AddonName = opts.Fleet.SignerName, opts.Fleet.AddonName
	if err := (&signer.Reconciler{Config: sc}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the CSR signer: %w", err)
	}
	return nil
}

// ClientOptions are the manager client's options. Every read that must not be stale (ledgers
// before a revocation, the CSR being signed) goes through the API reader explicitly.
func ClientOptions() client.Options {
	return client.Options{}
}

// CacheOptions cache only the CertificateSigningRequests of this project's signer, not every
// CSR of the hub (klusterlets and other addons make many).
func CacheOptions(opts Options) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&certificatesv1.CertificateSigningRequest{}: {Field: fields.OneTermEqualSelector("spec.signerName", opts.Fleet.SignerName)},
	}
	// Only this project's ConfigMaps (ledgers, revocation record): a hub has many others.
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})}
	byObject[&corev1.ConfigMap{}] = ours
	// With managed namespaces, Secrets, Deployments and ConfigMaps are watched only there, so
	// the manager needs no cluster-wide access to them.
	if nss := opts.Fleet.ManagedNamespaces; len(nss) > 0 {
		only := map[string]cache.Config{}
		for _, ns := range nss {
			only[ns] = cache.Config{}
		}
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: only}
		byObject[&appsv1.Deployment{}] = cache.ByObject{Namespaces: only}
		ours.Namespaces = only
		byObject[&corev1.ConfigMap{}] = ours
	}
	return cache.Options{ByObject: byObject}
}

// ControllerOptions are the controller-runtime manager options the binary runs with; tests
// build their managers from them too, so they see the cache a user runs.
func ControllerOptions(scheme *runtime.Scheme, opts Options) ctrl.Options {
	shutdown := opts.GracefulShutdownTimeout
	return ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.HealthProbeAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        opts.LeaderElectionID,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// Give up leadership on exit so a standby replica takes over at once.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdown,
		Client:                        ClientOptions(),
		Cache:                         CacheOptions(opts),
	}
}

// Run starts the hub controllers and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ControllerOptions(scheme, opts))
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := Setup(ctx, mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		// Ready once the informer caches have synced.
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("starting hub controllers")
	return mgr.Start(ctx)
}
