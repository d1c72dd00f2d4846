package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// joinOne adds one cluster to the fleet's last decision page and times its cluster secret.
func joinOne(ctx context.Context, env *testenv.Env, n int) (time.Duration, map[string]int, error) {
	c := env.Client
	name := fmt.Sprintf("cluster-%05d", n)
	if err := fakehub.CreateClusters(ctx, c, []string{name}, fakehub.Options{Addon: addonName}); err != nil {
		return 0, nil, err
	}
	before, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return 0, nil, err
	}
	changes, err := watchStatusChanges(ctx, env)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if err := fakehub.SetDecisions(ctx, c, namespace, "all", append(fakehub.Names("cluster-", n), name)); err != nil {
		return 0, nil, err
	}
	for {
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "cluster-" + name}, &corev1.Secret{}); err == nil {
			break
		}
		if time.Since(start) > time.Minute {
			return 0, nil, fmt.Errorf("no cluster secret for a joining cluster after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	// Counted once no write has come for 2 s: the join's later writes (its status, its
	// components' probe) are in it, however late.
	after, _, err := testenv.AwaitQuiet(ctx, env.Config, testenv.Quiet{For: 2 * time.Second, Limit: time.Minute})
	if err != nil {
		return 0, nil, err
	}
	diff := testenv.DiffWrites(before, after)
	delete(diff, "placementdecisions/status") // the benchmark's own page write
	delete(diff, "placementdecisions")
	for i, fields := range changes() {
		fmt.Fprintf(os.Stderr, "N=%d: join: status write %d changed %s\n", n, i+1, strings.Join(fields, ", "))
	}
	return took, diff, nil
}

// watchStatusChanges watches the benchmark's GitOpsCluster and, when its result is called,
// stops and returns for each status write seen what it changed (top-level status fields, and
// conditions by type), so that a join's writes say what each one carried.
func watchStatusChanges(ctx context.Context, env *testenv.Env) (func() [][]string, error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	g := &v1alpha1.GitOpsCluster{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, g); err != nil {
		return nil, err
	}
	w, err := wc.Watch(ctx, &v1alpha1.GitOpsClusterList{}, client.InNamespace(namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: g.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var out [][]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		prev := g.Status
		for ev := range w.ResultChan() {
			cur, ok := ev.Object.(*v1alpha1.GitOpsCluster)
			if !ok {
				continue
			}
			mu.Lock()
			out = append(out, statusDiff(prev, cur.Status))
			mu.Unlock()
			prev = cur.Status
		}
	}()
	return func() [][]string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}, nil
}

func statusDiff(a, b v1alpha1.GitOpsClusterStatus) []string {
	var out []string
	am, bm := asMap(a), asMap(b)
	delete(am, "conditions")
	delete(bm, "conditions")
	for k := range bm {
		if fmt.Sprint(am[k]) != fmt.Sprint(bm[k]) {
			out = append(out, fmt.Sprintf("%s %v -> %v", k, am[k], bm[k]))
		}
	}
	for k := range am {
		if _, ok := bm[k]; !ok {
			out = append(out, k+" removed")
		}
	}
	for _, c := range b.Conditions {
		if o := meta.FindStatusCondition(a.Conditions, c.Type); o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			out = append(out, fmt.Sprintf("condition %s: %q", c.Type, c.Message))
		}
	}
	if len(out) == 0 {
		out = append(out, "nothing in status (metadata only)")
	}
	return out
}

func asMap(v any) map[string]any {
	raw, _ := json.Marshal(v)
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}
