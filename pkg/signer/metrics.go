package signer

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Values of the result label of MetricCSRTotal.
const (
	ResultSigned   = "signed"
	ResultRejected = "rejected"
)

// MetricCSRTotal counts the CSRs the signer decided, by result and reason (ReasonSigned for
// signed ones, the Failed condition's reason for rejected ones).
const MetricCSRTotal = "argocd_agent_addon_csr_total"

var csrTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricCSRTotal,
	Help: "CertificateSigningRequests decided by the argocd-agent-addon signer, by result (signed or rejected) and reason.",
}, []string{"result", "reason"})

// MetricCSRDeferred counts requests left waiting because their requester was over its budget.
const MetricCSRDeferred = "argocd_agent_addon_csr_deferred_total"

var csrDeferred = prometheus.NewCounter(prometheus.CounterOpts{
	Name: MetricCSRDeferred,
	Help: "CertificateSigningRequests the argocd-agent-addon signer left waiting because their requester made too many in a short time.",
})

func init() {
	metrics.Registry.MustRegister(csrTotal, csrDeferred)
	// Every series exists from the start, so rate() and absent-alerts work before the first
	// rejection of a kind.
	csrTotal.WithLabelValues(ResultSigned, ReasonSigned)
	for _, reason := range AllReasons() {
		csrTotal.WithLabelValues(ResultRejected, reason)
	}
}
