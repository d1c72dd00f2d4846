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
	"maps"
	"slices"
	"strings"
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
