// Package cmd holds the argocd-agent-addon command line: manager, version and tools.
package cmd

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/lazylog"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/reloader"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// NewRootCommand returns the argocd-agent-addon command with all subcommands.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "argocd-agent-addon",
		Short:         "Runs argocd-agent fleets on Open Cluster Management",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newManagerCommand(), newVersionCommand(), newToolsCommand(), newCMPCommand(), newStatusCommand(), newResourceReporterCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), version.String())
			return err
		},
	}
}

func newToolsCommand() *cobra.Command {
	tools := &cobra.Command{Use: "tools", Short: "Helpers that run next to the agents"}
	opts := reloader.Options{}
	reload := &cobra.Command{
		Use:   "cert-reloader",
		Short: "Restart a process when the certificate files in a folder change",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			log := zap.New()
			return reloader.Run(c.Context(), log, opts)
		},
	}
	reload.Flags().StringVar(&opts.WatchDir, "watch-dir", "", "Folder holding the mounted certificate and key.")
	reload.Flags().StringVar(&opts.ProcessName, "process-name", "argocd-agent", "Base name of the executable to restart (shared process namespace).")
	reload.Flags().DurationVar(&opts.Interval, "interval", 10*time.Second, "How often to compare the files.")
	tools.AddCommand(reload)
	return tools
}

// newManagerCommand is the manager: one flag per option, declared in one list so that the
// chart's values and the docs can be checked against it, hence its length.
func newManagerCommand() *cobra.Command {
	opts := manager.DefaultOptions()
	var kubeconfig string
	// Measured on a 2-core hub: the API server takes 280 to 800 Secret writes per second from
	// 16 plain writers (1,000 and 5,000 Secrets; `make bench-fleet` prints it). The manager
	// writes at that pace only while it registers a new fleet or signs a renewal wave (one
	// write per cluster) and not at all when idle, so its limit sits at that pace rather than
	// far below it; the API server's priority and fairness keeps other clients served, and
	// --kube-api-qps lowers it on a shared hub.
	var qps float32 = 800
	burst := 1600
	zapOpts := zap.Options{}
	c := &cobra.Command{
		Use:   "manager",
		Short: "Run the hub controllers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// Bad flags fail before any connection to the API server is attempted: the bounds
			// first (values.schema.json carries the same), then what relates flags.
			if err := errors.Join(validateFlags(c.Flags(), ManagerFlagBounds()), opts.Validate()); err != nil {
				return err
			}
			ctrl.SetLogger(lazylog.New(zap.New(zap.UseFlagOptions(&zapOpts))))
			if soft := applyMemoryLimit(os.Getenv("GOMEMLIMIT"), "/sys/fs/cgroup"); soft > 0 {
				ctrl.Log.WithName("manager").Info("soft memory limit set from the container's limit", "bytes", soft)
			}
			if pct := applyGCPercent(os.Getenv("GOGC")); pct > 0 {
				ctrl.Log.WithName("manager").V(1).Info("garbage collection target set (GOGC unset)", "percent", pct)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			cfg.QPS, cfg.Burst = qps, burst
			return manager.Run(c.Context(), cfg, opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig for running outside a cluster; empty uses $KUBECONFIG or the in-cluster config.")
	fs.Float32Var(&qps, "kube-api-qps", qps, "Client-side limit of requests per second to the API server.")
	fs.IntVar(&burst, "kube-api-burst", burst, "Client-side burst of requests to the API server.")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "Address the Prometheus metrics endpoint listens on; \"0\" disables it.")
	fs.BoolVar(&opts.MetricsSecure, "metrics-secure", opts.MetricsSecure, "Serve metrics over HTTPS, only to bearer tokens the API server authenticates and allows get on /metrics; false serves plain, unauthenticated HTTP.")
	fs.StringVar(&opts.MetricsCertDir, "metrics-cert-dir", opts.MetricsCertDir, "Folder with tls.crt and tls.key for the metrics endpoint (reloaded on change); empty or without them uses a self-signed certificate.")
	fs.BoolVar(&opts.EnableHTTP2, "enable-http2", opts.EnableHTTP2, "Let the HTTPS metrics endpoint negotiate HTTP/2; off, it speaks HTTP/1.1 only.")
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, "Loopback address (127.0.0.1:port, [::1]:port or localhost:port) to serve net/http/pprof on; empty disables it.")
	fs.StringVar(&opts.HealthProbeAddr, "health-probe-bind-address", opts.HealthProbeAddr, "Address the /healthz and /readyz endpoints listen on.")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", opts.LeaderElection, "Elect a leader so that only one replica reconciles at a time.")
	fs.StringVar(&opts.LeaderElectionID, "leader-election-id", opts.LeaderElectionID, "Name of the Lease used for leader election.")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", opts.LeaderElectionNamespace, "Namespace of the leader-election Lease; empty means the manager's own namespace.")
	fs.DurationVar(&opts.LeaseDuration, "leader-elect-lease-duration", opts.LeaseDuration, "How long a standby replica waits before taking over a lease the leader has not renewed.")
	fs.DurationVar(&opts.RenewDeadline, "leader-elect-renew-deadline", opts.RenewDeadline, "How long the leader retries renewing its lease before it stops leading (shorter than the lease duration).")
	fs.DurationVar(&opts.RetryPeriod, "leader-elect-retry-period", opts.RetryPeriod, "How often replicas try to acquire or renew the lease.")
	fs.DurationVar(&opts.GracefulShutdownTimeout, "graceful-shutdown-timeout", opts.GracefulShutdownTimeout, "How long to wait for running reconciles on shutdown.")
	fs.IntVar(&opts.GitOpsClusterConcurrency, "gitopscluster-concurrency", opts.GitOpsClusterConcurrency, "How many GitOpsClusters are reconciled at the same time.")
	fs.IntVar(&opts.SignerConcurrency, "signer-concurrency", opts.SignerConcurrency, "How many agent CertificateSigningRequests are evaluated and signed at the same time.")
	f := &opts.Fleet
	fs.StringVar(&f.AddonName, "addon-name", f.AddonName, "Name of the ClusterManagementAddOn through which OCM installs the agents.")
	fs.StringSliceVar(&f.ManagedNamespaces, "managed-namespaces", f.ManagedNamespaces, "Principal namespaces whose Secrets and Deployments the manager may read and write (comma-separated); empty means all.")
	fs.StringVar(&f.SignerName, "signer-name", f.SignerName, "CustomSigner name of the agents' client certificates.")
	fs.StringVar(&f.PrincipalServiceName, "principal-service", f.PrincipalServiceName, "Name of the argocd-agent principal Service in the principal namespace.")
	fs.StringVar(&f.ResourceProxyServiceName, "resource-proxy-service", f.ResourceProxyServiceName, "Name of the principal's resource-proxy Service.")
	fs.Int32Var(&f.ResourceProxyPort, "resource-proxy-port", f.ResourceProxyPort, "Port of the principal's resource-proxy Service.")
	fs.StringVar(&f.PrincipalDeploymentName, "principal-deployment", f.PrincipalDeploymentName, "Name of the principal Deployment (its image is the agents' default; it is restarted when its certificate changes).")
	fs.StringVar(&f.DefaultAgentImage, "default-agent-image", f.DefaultAgentImage, "Agent image when neither the GitOpsCluster nor the principal Deployment names one.")
	fs.StringVar(&f.ReloaderImage, "reloader-image", f.ReloaderImage, "This project's image, run next to each agent to restart it when its certificate is renewed.")
	fs.StringVar(&f.SpokeImageRegistry, "spoke-image-registry", f.SpokeImageRegistry, "Registry (host[:port][/path]) that replaces the registry of every image run on the managed clusters: agent, cert-reloader, Argo CD and redis. Empty keeps each image's own.")
	fs.StringSliceVar(&f.SpokeImagePullSecrets, "spoke-image-pull-secrets", f.SpokeImagePullSecrets, "Secrets (comma-separated names, in the agent namespace of each managed cluster) that every pod the addon runs there pulls its images with.")
	fs.StringVar(&f.DefaultAgentNamespace, "default-agent-namespace", f.DefaultAgentNamespace, "Managed-cluster namespace of the agent when the GitOpsCluster sets none.")
	fs.DurationVar(&f.CAValidity, "ca-validity", f.CAValidity, "Lifetime of a hub CA created by the manager.")
	fs.DurationVar(&f.ServerCertValidity, "server-cert-validity", f.ServerCertValidity, "Lifetime of the principal and resource-proxy serving certificates.")
	fs.DurationVar(&f.ClusterSecretValidity, "cluster-secret-cert-validity", f.ClusterSecretValidity, "Lifetime of the resource-proxy client certificates in the agents' cluster secrets, 1h to 720h; renewed at two thirds. argocd-agent's resource proxy checks neither the blocklist nor the cluster secret, so a leaked copy is usable, while its agent is connected, until it expires.")
	fs.DurationVar(&f.DepartureSettle, "departure-settle", f.DepartureSettle, "How long a cluster must stay out of its GitOpsCluster's selection before its agent is revoked (then confirmed by a live read).")
	fs.DurationVar(&f.CertManagerRecheck, "cert-manager-recheck", f.CertManagerRecheck, "How often a principal whose PKI cert-manager keeps is checked while all is well (cert-manager's kinds are not watched); 0 turns the check off.")
	fs.StringSliceVar(&f.CertManagerAllowedIssuers, "cert-manager-allowed-issuers", f.CertManagerAllowedIssuers, "cert-manager issuers (<kind>/<name> or <group>/<kind>/<name>, comma-separated) any GitOpsCluster may name, besides an Issuer of its principal namespace; a ClusterIssuer can also allow namespaces with the annotation argocd-agent-addon.open-cluster-management.io/allowed-gitopscluster-namespaces.")
	fs.IntVar(&f.MaxRevocationPercent, "max-revocation-percent", f.MaxRevocationPercent, "Circuit breaker: a pass that would revoke more than this percentage of a GitOpsCluster's agents waits for approval; 0 or 100 disables it.")
	fs.IntVar(&opts.Signer.MaxCertificatesPerCluster, "max-certificates-per-cluster", opts.Signer.MaxCertificatesPerCluster, "The signer refuses a cluster's request (TooManyCertificates) while it holds this many unexpired certificates; 0 disables the check.")
	fs.IntVar(&opts.Signer.RequestBurst, "csr-burst-per-requester", opts.Signer.RequestBurst, "How many certificate requests one requester (a cluster's agent identity) may make at once before the signer paces them; 0 disables the pacing.")
	fs.DurationVar(&opts.Signer.RequestInterval, "csr-interval-per-requester", opts.Signer.RequestInterval, "Past its burst, a requester gets one certificate request looked at per this interval; the others wait, unanswered.")
	fs.DurationVar(&opts.Signer.DefaultValidity, "agent-cert-validity", opts.Signer.DefaultValidity, "Lifetime of the agents' client certificates issued by the signer when the GitOpsCluster sets no clientCertificateValidity (at least 1h).")
	fs.DurationVar(&opts.Signer.MaxCSRAge, "max-csr-age", opts.Signer.MaxCSRAge, "The signer refuses agent CertificateSigningRequests created longer ago than this; 0 disables the check.")
	fs.BoolVar(&opts.PullModel.Enabled, "pull-model", opts.PullModel.Enabled, "Run the basic pull model (hub Applications labelled for a managed cluster delivered as ManifestWorks, status fed back) when the hub serves Argo CD's Application API.")
	fs.DurationVar(&opts.PullModel.OfflineRelease, "pull-model-offline-release-after", opts.PullModel.OfflineRelease, "How long a deleted hub Application of the pull model waits for its cluster to delete the workload while the cluster is unavailable, before its finalizer is released anyway (OCM's work agent deletes the workload when the cluster returns); 0 waits however long it takes.")
	fs.DurationVar(&opts.PullModel.RegistrationGrace, "pull-model-registration-grace", opts.PullModel.RegistrationGrace, "How long an ArgoCDClusterRegistration keeps the Argo CD cluster secret of a cluster that left its Placement while OCM marks it unreachable or unavailable (so ApplicationSets keep its Applications through an outage), counted from when the manager saw it leave; a cluster dropped while healthy loses it at once. 0 keeps none; at most 720h.")
	fs.IntVar(&opts.PullModel.Concurrency, "pull-model-concurrency", opts.PullModel.Concurrency, "How many Applications the pull model's propagation and status controllers each reconcile at the same time.")
	pm := &opts.PullModel.Policy
	fs.StringVar(&pm.ArgoCDNamespace, "pull-model-argocd-namespace", pm.ArgoCDNamespace, "The hub Argo CD namespace: the AppProjects that decide what a pull-model Application may deploy are read there.")
	fs.StringSliceVar(&pm.SourceNamespaces, "pull-model-namespaces", pm.SourceNamespaces, "Hub namespaces whose Applications the pull model may deliver (comma-separated); empty means the hub Argo CD namespace only. Each also needs a ManagedClusterSetBinding for the clusters it may reach.")
	fs.StringVar(&pm.SpokeNamespace, "pull-model-spoke-namespace", pm.SpokeNamespace, "The Argo CD namespace on the managed clusters: every delivered Application lands there.")
	fs.Var(namespacedNameValue{&opts.PullModel.SealSecret}, "pull-model-seal-secret", "<namespace>/<name> of the Secret holding the key that marks the pull model's ManifestWorks as its own (created when missing).")
	bindLogFlags(fs, &zapOpts)
	return c
}

// bindLogFlags adds controller-runtime's zap flags (--zap-log-level and the others) to fs.
func bindLogFlags(fs *pflag.FlagSet, opts *zap.Options) {
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	opts.BindFlags(logFlags)
	fs.AddGoFlagSet(logFlags)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	return ctrl.GetConfig()
}

// namespacedNameValue is a <namespace>/<name> flag.
type namespacedNameValue struct{ v *types.NamespacedName }

func (n namespacedNameValue) String() string {
	if n.v == nil {
		return ""
	}
	return n.v.String()
}

func (n namespacedNameValue) Set(s string) error {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("want <namespace>/<name>, got %q", s)
	}
	*n.v = types.NamespacedName{Namespace: ns, Name: name}
	return nil
}

func (namespacedNameValue) Type() string { return "namespace/name" }
