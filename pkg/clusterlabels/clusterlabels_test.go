package clusterlabels

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestApplyCopiesLabelsAndRemovesOnlyWhatItCopied(t *testing.T) {
	secret := map[string]string{
		"argocd.argoproj.io/secret-type": "cluster",
		"team":                           "by-hand", // someone else's label, not copied
	}
	cluster := map[string]string{
		"env":                            "prod",
		"cloud":                          "aws",
		"argocd.argoproj.io/secret-type": "repository", // reserved: never copied
		"apps.open-cluster-management.io/cluster-name":                     "spoofed",      // reserved
		"argocd-agent.argoproj-labs.io/agent-name":                         "spoofed",      // reserved
		"app.kubernetes.io/managed-by":                                     "someone-else", // reserved
		"argocd-agent-addon.open-cluster-management.io/gitopscluster-name": "x",            // reserved
	}
	labels, annotations, changed := Apply(secret, nil, cluster)
	if !changed {
		t.Fatal("first copy reported no change")
	}
	want := map[string]string{"argocd.argoproj.io/secret-type": "cluster", "team": "by-hand", "env": "prod", "cloud": "aws"}
	if !maps.Equal(labels, want) {
		t.Fatalf("labels = %v, want %v", labels, want)
	}
	if got := annotations[AnnotationCopied]; got != "cloud,env" {
		t.Fatalf("copied annotation = %q", got)
	}
	if secret["env"] != "" {
		t.Fatal("input labels were modified")
	}

	// Idempotent: the same cluster labels change nothing.
	if _, _, changed := Apply(labels, annotations, cluster); changed {
		t.Fatal("second pass with the same labels reported a change")
	}

	// A label removed from the cluster goes; a changed one follows; the foreign one stays.
	delete(cluster, "cloud")
	cluster["env"] = "staging"
	labels2, annotations2, changed := Apply(labels, annotations, cluster)
	if !changed {
		t.Fatal("change not detected")
	}
	want = map[string]string{"argocd.argoproj.io/secret-type": "cluster", "team": "by-hand", "env": "staging"}
	if !maps.Equal(labels2, want) || annotations2[AnnotationCopied] != "env" {
		t.Fatalf("labels = %v, annotations = %v", labels2, annotations2)
	}

	// No copyable labels left: the record goes too.
	labels3, annotations3, _ := Apply(labels2, annotations2, map[string]string{})
	if _, ok := labels3["env"]; ok || annotations3[AnnotationCopied] != "" {
		t.Fatalf("labels = %v, annotations = %v", labels3, annotations3)
	}
	if labels3["team"] != "by-hand" {
		t.Fatal("a label the project did not copy was removed")
	}
}

func TestApplyNeverOverwritesReservedKeysThroughTheRecord(t *testing.T) {
	// A forged record naming a reserved key must not make Apply delete it.
	secret := map[string]string{"argocd.argoproj.io/secret-type": "cluster"}
	ann := map[string]string{AnnotationCopied: "argocd.argoproj.io/secret-type"}
	labels, _, _ := Apply(secret, ann, map[string]string{"argocd.argoproj.io/secret-type": "x"})
	if labels["argocd.argoproj.io/secret-type"] != "cluster" {
		t.Fatalf("reserved label changed: %v", labels)
	}
}

func TestIgnoreCopyOnlyUpdates(t *testing.T) {
	old := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s",
		Labels:      map[string]string{"argocd.argoproj.io/secret-type": "cluster", "env": "prod"},
		Annotations: map[string]string{AnnotationCopied: "env"}},
		Data: map[string][]byte{"name": []byte("c1")}}
	p := IgnoreCopyOnlyUpdates()
	update := func(mutate func(*corev1.Secret)) bool {
		n := old.DeepCopy()
		mutate(n)
		return p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n})
	}
	if update(func(n *corev1.Secret) {
		n.Labels["env"] = "dev"
		n.Labels["region"] = "eu"
		n.Annotations[AnnotationCopied] = "env,region"
	}) {
		t.Error("an update of copied labels only was passed on")
	}
	if update(func(n *corev1.Secret) { delete(n.Labels, "env"); delete(n.Annotations, AnnotationCopied) }) {
		t.Error("removing the last copied label was passed on")
	}
	for name, m := range map[string]func(*corev1.Secret){
		"data":           func(n *corev1.Secret) { n.Data["name"] = []byte("c2") },
		"own label":      func(n *corev1.Secret) { n.Labels["argocd.argoproj.io/secret-type"] = "x" },
		"foreign label":  func(n *corev1.Secret) { n.Labels["team"] = "a" },
		"other annotion": func(n *corev1.Secret) { n.Annotations["x"] = "y" },
	} {
		if !update(m) {
			t.Errorf("an update of %s was dropped", name)
		}
	}
}
