package namespaceindex

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestWithoutLeavesOutOnlyTheNamespaceIndexOfTheKindsNamed(t *testing.T) {
	newInformer := Without(&corev1.ConfigMap{})
	byLabel := func(obj any) ([]string, error) { return nil, nil }
	indexers := func() toolscache.Indexers {
		return toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc, "label": byLabel}
	}

	named := newInformer(&toolscache.ListWatch{}, &corev1.ConfigMap{}, 0, indexers()).GetIndexer().GetIndexers()
	if _, ok := named[toolscache.NamespaceIndex]; ok {
		t.Error("a kind named keeps its namespace index")
	}
	if _, ok := named["label"]; !ok {
		t.Error("a kind named lost an index other than the namespace's")
	}

	other := newInformer(&toolscache.ListWatch{}, &corev1.Secret{}, 0, indexers()).GetIndexer().GetIndexers()
	if _, ok := other[toolscache.NamespaceIndex]; !ok {
		t.Error("a kind not named lost its namespace index")
	}
}
