// Package fleetmetrics reports, as Prometheus gauges, what the hub controllers have already
// summarised: each GitOpsCluster's status counts and conditions, and each principal's blocklist
// and PKI certificates. It reads the manager's cache at scrape time and writes nothing, so the
// reconcilers need no metric code of their own and a scrape costs a handful of cache reads per
// GitOpsCluster and per principal, whatever the fleet's size.
package fleetmetrics

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	gitopsconfig "github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// Metric names. Per-GitOpsCluster series carry gitopscluster_namespace and gitopscluster, per
// principal ones principal_namespace: not "namespace", which Prometheus's Kubernetes discovery
// sets to the manager's own namespace and would rename to exported_namespace.
const (
	MetricSelectedClusters   = "argocd_agent_addon_gitopscluster_selected_clusters"
	MetricAvailableAgents    = "argocd_agent_addon_gitopscluster_available_agents"
	MetricAgentsOtherVersion = "argocd_agent_addon_gitopscluster_agents_on_other_version"
	MetricRevokedAgents      = "argocd_agent_addon_gitopscluster_revoked_agents"
	MetricPendingDepartures  = "argocd_agent_addon_gitopscluster_pending_departures"
	MetricCondition          = "argocd_agent_addon_gitopscluster_condition"
	MetricBlocklistEntries   = "argocd_agent_addon_blocklist_entries"
	MetricBlocklistBytes     = "argocd_agent_addon_blocklist_bytes"
	MetricBlocklistCapacity  = "argocd_agent_addon_blocklist_capacity_bytes"
	MetricCertificateExpiry  = "argocd_agent_addon_certificate_expiry_timestamp_seconds"
	MetricReadErrors         = "argocd_agent_addon_fleet_metrics_read_errors_total"
)

// Label names.
const (
	LabelGitOpsClusterNamespace = "gitopscluster_namespace"
	LabelGitOpsCluster          = "gitopscluster"
	LabelCondition              = "condition"
	LabelReason                 = "reason"
	LabelPrincipalNamespace     = "principal_namespace"
	LabelSecret                 = "secret"
)

var (
	gocLabels       = []string{LabelGitOpsClusterNamespace, LabelGitOpsCluster}
	principalLabels = []string{LabelPrincipalNamespace}

	selectedDesc = prometheus.NewDesc(MetricSelectedClusters,
		"Managed clusters the GitOpsCluster's Placement selects (status.selectedClusters).", gocLabels, nil)
	availableDesc = prometheus.NewDesc(MetricAvailableAgents,
		"Selected clusters whose argocd-agent is available, by its ManagedClusterAddOn (status.availableAgents).", gocLabels, nil)
	otherVersionDesc = prometheus.NewDesc(MetricAgentsOtherVersion,
		"Selected clusters whose agent runs another version than the principal, which argocd-agent refuses (status.agentsOnOtherVersion).", gocLabels, nil)
	revokedDesc = prometheus.NewDesc(MetricRevokedAgents,
		"Clusters of spec.revokedClusters whose agent is revoked (status.revokedAgents).", gocLabels, nil)
	departuresDesc = prometheus.NewDesc(MetricPendingDepartures,
		"Clusters that left the selection and whose agents are revoked once the departure is confirmed or approved (status.pendingDepartures).", gocLabels, nil)
	conditionDesc = prometheus.NewDesc(MetricCondition,
		"The GitOpsCluster's status conditions by type, with their current reason: 1 when True, 0 when False or Unknown.",
		append(gocLabels, LabelCondition, LabelReason), nil)
	entriesDesc = prometheus.NewDesc(MetricBlocklistEntries,
		"Client certificates on the principal's TLS blocklist (keys of the argocd-agent-tls-blocklist ConfigMap).", principalLabels, nil)
	bytesDesc = prometheus.NewDesc(MetricBlocklistBytes,
		"Bytes the principal's TLS blocklist uses, counted as its capacity is.", principalLabels, nil)
	capacityDesc = prometheus.NewDesc(MetricBlocklistCapacity,
		"Bytes the principal's TLS blocklist may use (it stays well under etcd's object size limit); a revocation that does not fit is not blocked.", principalLabels, nil)
	expiryDesc = prometheus.NewDesc(MetricCertificateExpiry,
		"When the certificate of a principal's PKI Secret (the CA, the principal's and the resource proxy's serving certificates) expires, in seconds since the epoch.",
		append(principalLabels, LabelSecret), nil)
	readErrorsDesc = prometheus.NewDesc(MetricReadErrors,
		"Reads of the manager's cache that failed while these metrics were collected; series are missing from those scrapes.", nil, nil)
)

// pkiSecrets are the Secrets of a principal namespace whose certificates expire: the CA that
// signs every agent, and the two serving certificates the agents and Argo CD verify.
var pkiSecrets = []string{names.CASecretName, names.PrincipalTLSSecretName, names.ResourceProxySecretName}

// readTimeout bounds a scrape's cache reads; synced caches answer at once.
const readTimeout = 10 * time.Second

// Collector is a prometheus.Collector over the manager's cache.
type Collector struct {
	// Client reads the manager's cache; Reader reads past it, for PKI Secrets a cache of only
	// the project's own Secrets does not hold (a CA the user put in place).
	Client client.Reader
	Reader client.Reader
	Config gitopsconfig.Config
	// Registerer is where Start registers the collector.
	Registerer prometheus.Registerer
	Log        logr.Logger

	readErrors atomic.Uint64

	// expiries remembers each PKI Secret's expiry by resourceVersion, so a scrape parses only
	// certificates that changed since the last one.
	mu       sync.Mutex
	expiries map[types.NamespacedName]expiry
}

type expiry struct {
	resourceVersion string
	notAfter        time.Time
	ok              bool
}

// Setup adds to mgr a Collector over its cache, reporting into controller-runtime's registry
// (the one its /metrics serves) while this replica leads.
func Setup(mgr ctrl.Manager, cfg gitopsconfig.Config) error {
	return mgr.Add(&Collector{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Config: cfg,
		Registerer: metrics.Registry, Log: ctrl.Log.WithName("fleetmetrics"),
	})
}

// NeedLeaderElection: only the leader reports. A standby's cache holds the same GitOpsClusters,
// and two replicas reporting them would count the fleet twice in any sum over the job.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start registers the collector and takes it out again when ctx ends. If the registry already
// has one (another manager in the same process, as tests run them), that one reports.
func (c *Collector) Start(ctx context.Context) error {
	if err := c.Registerer.Register(c); err != nil {
		c.Log.Info("fleet metrics are reported by another collector in this process", "reason", err.Error())
		<-ctx.Done()
		return nil
	}
	<-ctx.Done()
	c.Registerer.Unregister(c)
	return nil
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{selectedDesc, availableDesc, otherVersionDesc, revokedDesc, departuresDesc, conditionDesc,
		entriesDesc, bytesDesc, capacityDesc, expiryDesc, readErrorsDesc} {
		ch <- d
	}
}

// Collect reads the GitOpsClusters and their principals from the cache. A failed read leaves
// its series out and is counted: one invalid metric would fail the whole scrape.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	defer func() {
		ch <- prometheus.MustNewConstMetric(readErrorsDesc, prometheus.CounterValue, float64(c.readErrors.Load()))
	}()
	var gocs v1alpha1.GitOpsClusterList
	// Read only: the cache's own objects are not copied.
	if err := c.Client.List(ctx, &gocs, client.UnsafeDisableDeepCopy); err != nil {
		c.failed(err, "listing GitOpsClusters")
		return
	}
	principals := map[string]bool{}
	for i := range gocs.Items {
		goc := &gocs.Items[i]
		st := &goc.Status
		for _, g := range []struct {
			desc  *prometheus.Desc
			value int32
		}{
			{selectedDesc, st.SelectedClusters}, {availableDesc, st.AvailableAgents}, {otherVersionDesc, st.AgentsOnOtherVersion},
			{revokedDesc, st.RevokedAgents}, {departuresDesc, st.PendingDepartures},
		} {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(g.value), goc.Namespace, goc.Name)
		}
		for _, cond := range st.Conditions {
			// The reason is one of the few the API declares per type, so the series stay few.
			ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, boolValue(cond.Status == metav1.ConditionTrue),
				goc.Namespace, goc.Name, cond.Type, cond.Reason)
		}
		// A principal namespace outside the managed ones is refused by the reconciler and not
		// in the cache.
		if ns := names.PrincipalNamespace(goc); c.Config.NamespaceManaged(ns) {
			principals[ns] = true
		}
	}
	// Once per principal, however many GitOpsClusters share it: a series twice fails the scrape.
	nss := make([]string, 0, len(principals))
	for ns := range principals {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		c.collectPrincipal(ctx, ch, ns)
	}
}

func (c *Collector) collectPrincipal(ctx context.Context, ch chan<- prometheus.Metric, ns string) {
	ch <- prometheus.MustNewConstMetric(capacityDesc, prometheus.GaugeValue, ledger.BlocklistBudget, ns)
	// The cache's copy, read only: a full blocklist holds some 17,000 keys.
	blocklist := &corev1.ConfigMap{}
	switch err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ledger.BlocklistName}, blocklist, client.UnsafeDisableDeepCopy); {
	case err == nil, apierrors.IsNotFound(err):
		// None yet is an empty blocklist: the principal refuses no certificate.
		ch <- prometheus.MustNewConstMetric(entriesDesc, prometheus.GaugeValue, float64(len(blocklist.Data)), ns)
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.GaugeValue, float64(ledger.BlocklistBytes(blocklist.Data)), ns)
	default:
		c.failed(err, "reading the blocklist", "namespace", ns)
	}
	for _, name := range pkiSecrets {
		if notAfter, ok := c.expiry(ctx, types.NamespacedName{Namespace: ns, Name: name}); ok {
			ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(notAfter.Unix()), ns, name)
		}
	}
}

// expiry returns when the first certificate of the Secret's tls.crt expires; false when the
// Secret does not exist or holds no certificate.
func (c *Collector) expiry(ctx context.Context, key types.NamespacedName) (time.Time, bool) {
	s := &corev1.Secret{}
	err := c.Client.Get(ctx, key, s, client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) && c.Config.SecretsCacheLabelled() && c.Reader != nil {
		// As the PKI keeper does: without managed namespaces the cache holds only the
		// project's own Secrets.
		s = &corev1.Secret{}
		err = c.Reader.Get(ctx, key, s)
	}
	if apierrors.IsNotFound(err) {
		return time.Time{}, false
	}
	if err != nil {
		c.failed(err, "reading a PKI Secret", "namespace", key.Namespace, "name", key.Name)
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.expiries[key]; ok && e.resourceVersion == s.ResourceVersion && s.ResourceVersion != "" {
		return e.notAfter, e.ok
	}
	e := expiry{resourceVersion: s.ResourceVersion}
	if certs, err := pki.ParseCertificates(s.Data[corev1.TLSCertKey]); err == nil {
		e.notAfter, e.ok = certs[0].NotAfter, true
	}
	if c.expiries == nil {
		c.expiries = map[types.NamespacedName]expiry{}
	}
	c.expiries[key] = e
	return e.notAfter, e.ok
}

func (c *Collector) failed(err error, what string, kv ...any) {
	c.readErrors.Add(1)
	c.Log.Error(err, "fleet metrics: "+what, kv...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
