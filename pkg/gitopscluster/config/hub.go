package config

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Hub is the hub as every part of the GitOpsCluster reconciler reaches it.
type Hub struct {
	// Client reads through the manager's cache and writes.
	Client client.Client
	// Reader reads around the cache where a stale read would do harm; never nil.
	Reader client.Reader
	Config Config
	// Recorder emits the Events of the controllers that own objects other than GitOpsClusters
	// (the blocklist keeper, the AgentRevocation enforcer); nil emits none. The GitOpsCluster
	// reconciler gives its parts none: they return their Events (Event).
	Recorder events.EventRecorder
}

// Event is an Event a part of the reconciler decided on. The parts return them with their
// results; the pass emits them, so that every Event on a GitOpsCluster is born in one place.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type, Reason, Action, Message string
}

// Warning is a Warning Event.
func Warning(reason, action, format string, args ...any) Event {
	return Event{Type: corev1.EventTypeWarning, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)}
}

// Normal is a Normal Event.
func Normal(reason, action, format string, args ...any) Event {
	return Event{Type: corev1.EventTypeNormal, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)}
}
