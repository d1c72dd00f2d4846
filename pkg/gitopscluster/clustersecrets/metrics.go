package clustersecrets

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricAgentsRegistered counts the agents registered with their principal: cluster secrets
// written for clusters that had none.
const MetricAgentsRegistered = "argocd_agent_addon_agents_registered_total"

var agentsRegistered = prometheus.NewCounter(prometheus.CounterOpts{
	Name: MetricAgentsRegistered,
	Help: "argocd-agent agents registered with their principal (an Argo CD cluster secret written for a cluster that had none).",
})

func init() { metrics.Registry.MustRegister(agentsRegistered) }
