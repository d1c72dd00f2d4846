package propagation

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricDeliveries counts the passes of the propagation controller over live hub Applications
// by how they ended: delivered (the ManifestWork written or already as it should be) or
// refused, with the refusal's reason.
const MetricDeliveries = "argocd_agent_addon_pull_model_deliveries_total"

// Values of the result label of MetricDeliveries; a delivered pass has reason ReasonDelivered.
const (
	ResultDelivered = "delivered"
	ResultRefused   = "refused"
	ReasonDelivered = "Delivered"
)

var deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricDeliveries,
	Help: "Pull-model passes over hub Applications, by result (delivered: the ManifestWork written or already current; refused) and reason.",
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

// countPass records how a pass over a live Application ended: every such pass ends in
// setCondition, with the refusal or nil.
func countPass(refusal *Refusal) {
	if refusal == nil {
		deliveries.WithLabelValues(ResultDelivered, ReasonDelivered).Inc()
	} else {
		deliveries.WithLabelValues(ResultRefused, refusal.Reason).Inc()
	}
}
