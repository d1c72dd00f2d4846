// Package clustersecrets keeps the Argo CD cluster secrets that register a GitOpsCluster's agents
// with the principal: one per owned cluster, its resource-proxy client certificate issued by the
// principal's CA and recorded in the cluster's ledger before the secret is written, renewed
// before expiry or after a CA change, and labelled like its ManagedCluster.
package clustersecrets

import (
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
)

// Writer writes the agents' cluster secrets.
type Writer struct {
	Client client.Client
	// Reader reads around the cache where a stale read would do harm.
	Reader   client.Reader
	Config   config.Config
	Recorder events.EventRecorder
}

func (w *Writer) event(goc *v1alpha1.GitOpsCluster, eventType, reason, action, note string, args ...any) {
	if w.Recorder != nil {
		w.Recorder.Eventf(goc, nil, eventType, reason, action, note, args...)
	}
}
