package clusterlabels

import (
	"maps"
	"testing"
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
