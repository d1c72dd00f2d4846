package config

import (
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// Hub is the hub as every part of the GitOpsCluster reconciler reaches it.
type Hub struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// Reader reads around the cache where a stale read would do harm; never nil.
	Reader client.Reader
	Config Config
	// Recorder emits Events; nil emits none.
	Recorder events.EventRecorder
}

// Event emits an Event on goc.
func (h Hub) Event(goc *v1alpha1.GitOpsCluster, eventType, reason, action, note string, args ...any) {
	if h.Recorder != nil {
		h.Recorder.Eventf(goc, nil, eventType, reason, action, note, args...)
	}
}
