// Package clusterlabels copies a ManagedCluster's labels onto the Argo CD cluster secrets the
// project writes for it, so that ApplicationSet cluster generators can select clusters by the
// labels OCM users already put on their ManagedClusters.
//
// Which keys were copied is recorded on the secret itself (annotation AnnotationCopied): a label
// removed from the ManagedCluster is removed from the secret, while labels someone else put on
// the secret stay. Keys of Argo CD, argocd-agent, OCM's application integration and this project
// are never copied, so a ManagedCluster label can never change what a secret means.
package clusterlabels

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// AnnotationCopied lists, comma separated and sorted, the label keys copied from the ManagedCluster.
const AnnotationCopied = "argocd-agent-addon.open-cluster-management.io/cluster-labels"

// reservedPrefixes are label key prefixes that mean something to Argo CD, argocd-agent, OCM's
// application integration or this project.
var reservedPrefixes = []string{
	"argocd.argoproj.io/",
	"argocd-agent.argoproj-labs.io/",
	"argocd-agent-addon.open-cluster-management.io/",
	"apps.open-cluster-management.io/",
}

// reservedKeys are single keys the project sets on its objects.
var reservedKeys = map[string]bool{
	"app.kubernetes.io/managed-by": true,
}

// Copyable reports whether a ManagedCluster label key may be copied onto a cluster secret.
func Copyable(key string) bool {
	if reservedKeys[key] {
		return false
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(key, p) {
			return false
		}
	}
	return true
}

// Apply returns the labels and annotations a secret should carry given its ManagedCluster's labels
// (nil when the ManagedCluster is unknown: nothing is copied then) and whether they differ from
// the current ones. The inputs are not modified.
func Apply(labels, annotations, clusterLabels map[string]string) (map[string]string, map[string]string, bool) {
	newLabels := maps.Clone(labels)
	if newLabels == nil {
		newLabels = map[string]string{}
	}
	for _, k := range Copied(annotations) {
		// A reserved key is never the project's to remove, whatever the record says.
		if _, still := clusterLabels[k]; !still && Copyable(k) {
			delete(newLabels, k)
		}
	}
	var copied []string
	for k, v := range clusterLabels {
		if Copyable(k) {
			newLabels[k] = v
			copied = append(copied, k)
		}
	}
	slices.Sort(copied)
	newAnnotations := maps.Clone(annotations)
	if len(copied) > 0 {
		if newAnnotations == nil {
			newAnnotations = map[string]string{}
		}
		newAnnotations[AnnotationCopied] = strings.Join(copied, ",")
	} else {
		delete(newAnnotations, AnnotationCopied)
	}
	changed := !maps.Equal(labels, newLabels) || annotations[AnnotationCopied] != newAnnotations[AnnotationCopied]
	return newLabels, newAnnotations, changed
}

// Copied returns the label keys a secret's annotations record as copied.
func Copied(annotations map[string]string) []string {
	v := annotations[AnnotationCopied]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// IgnoreCopyOnlyUpdates drops Secret update events that change nothing but copied cluster
// labels, so that a ManagedCluster's label change, once copied, does not wake the controllers
// that own the secret (each of which would re-read its whole fleet for nothing).
func IgnoreCopyOnlyUpdates() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Secret)
		n, ok2 := e.ObjectNew.(*corev1.Secret)
		if !ok1 || !ok2 {
			return true
		}
		copied := map[string]bool{}
		for _, k := range append(Copied(o.Annotations), Copied(n.Annotations)...) {
			if Copyable(k) {
				copied[k] = true
			}
		}
		if len(copied) == 0 {
			return true
		}
		strip := func(m map[string]string, extra string) map[string]string {
			out := make(map[string]string, len(m))
			for k, v := range m {
				if !copied[k] && k != extra {
					out[k] = v
				}
			}
			return out
		}
		same := maps.Equal(strip(o.Labels, ""), strip(n.Labels, "")) &&
			maps.Equal(strip(o.Annotations, AnnotationCopied), strip(n.Annotations, AnnotationCopied)) &&
			o.Type == n.Type && maps.EqualFunc(o.Data, n.Data, bytes.Equal) &&
			o.DeletionTimestamp.Equal(n.DeletionTimestamp) && slices.Equal(o.Finalizers, n.Finalizers)
		return !same
	}}
}
