package propagation

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricDeliveries counts deliveries of hub Applications, not passes over them: delivered, each
// time an Application's ManifestWork is created or updated (a pass that finds it current writes
// nothing and counts nothing), and refused, each time a refusal is recorded on an Application (its
// delivery condition appears or changes), with the refusal's reason. A resync or a wake that
// changes nothing thus leaves it as it is, and its rate is what reaches, or is kept from, the
// clusters.
const MetricDeliveries = "argocd_agent_addon_pull_model_deliveries_total"

// Values of the result label of MetricDeliveries; a delivery has reason ReasonDelivered.
const (
	ResultDelivered = "delivered"
	ResultRefused   = "refused"
	ReasonDelivered = "Delivered"
)

var deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricDeliveries,
	Help: "Pull-model deliveries of hub Applications, by result (delivered: the Application's ManifestWork created or updated; refused: a refusal recorded on the Application) and reason.",
}, []string{"result", "reason"})

// refusalReasons are the reasons a live Application's delivery may be refused with.
var refusalReasons = []string{
	ReasonMissingCluster, ReasonMissingSkipReconcile, ReasonUnknownCluster, ReasonClusterNotAccepted, ReasonTooLarge, ReasonInvalid,
	ReasonHubItself, ReasonBadSpokeNamespace, ReasonNamespaceNotAllowed, ReasonAgentNamespace, ReasonAgentCopy, ReasonClusterNotBound,
	ReasonProjectNotFound, ReasonProjectForbids, ReasonSpokeNamespaceNotAllowed, ReasonWorkNameTaken, ReasonSpokeNameTaken,
	ReasonSpokePlaceChanged, ReasonOperationNotAllowed, ReasonProjectNotApplied,
	ReasonWaitingForProject,
}

func init() {
	metrics.Registry.MustRegister(deliveries)
	// Every series exists from the start, so rate() works before the first refusal of a kind.
	deliveries.WithLabelValues(ResultDelivered, ReasonDelivered)
	for _, r := range refusalReasons {
		deliveries.WithLabelValues(ResultRefused, r)
	}
}

// countDelivered records a write of an Application's ManifestWork.
func countDelivered() { deliveries.WithLabelValues(ResultDelivered, ReasonDelivered).Inc() }

// countRefused records a refusal newly set on an Application.
func countRefused(reason string) { deliveries.WithLabelValues(ResultRefused, reason).Inc() }
