package signer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// revocationAPI stands for the API server's AgentRevocations of one namespace: a Get of one,
// and a list of their metadata that takes delay and pages at the limit asked for.
type revocationAPI struct {
	client.Reader
	delay   time.Duration
	mu      sync.Mutex
	revoked map[string]*metav1.Time // name -> deletion timestamp (nil: not being deleted)
	gets    atomic.Int64
	lists   atomic.Int64
}

func (a *revocationAPI) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	a.gets.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	deleted, ok := a.revoked[key.Name]
	if !ok {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("agentrevocations").GroupResource(), key.Name)
	}
	rev := obj.(*v1alpha1.AgentRevocation)
	rev.Namespace, rev.Name, rev.DeletionTimestamp = key.Namespace, key.Name, deleted
	return nil
}

func (a *revocationAPI) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	a.lists.Add(1)
	o := (&client.ListOptions{}).ApplyOptions(opts)
	time.Sleep(a.delay)
	a.mu.Lock()
	defer a.mu.Unlock()
	l := list.(*metav1.PartialObjectMetadataList)
	if l.GroupVersionKind() != v1alpha1.GroupVersion.WithKind("AgentRevocationList") {
		return fmt.Errorf("listed %s, want AgentRevocations' metadata", l.GroupVersionKind())
	}
	for name, deleted := range a.revoked {
		if o.Limit > 0 && int64(len(l.Items)) == o.Limit {
			l.Continue = "more"
			break
		}
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: name, DeletionTimestamp: deleted}})
	}
	return nil
}

// revocationCache stands for the manager's cache of AgentRevocations: it holds cached of them.
type revocationCache struct {
	client.Client
	cached int
}

func (c *revocationCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	l := list.(*v1alpha1.AgentRevocationList)
	for i := range c.cached {
		if o.Limit > 0 && int64(len(l.Items)) == o.Limit {
			break
		}
		l.Items = append(l.Items, v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: fmt.Sprintf("cached-%d", i)}})
	}
	return nil
}

func TestLiveRevocation(t *testing.T) {
	ctx := context.Background()
	judge := func(read revocationRead, cluster string) string {
		rej, err := judgeRevocation(read, &v1alpha1.GitOpsCluster{}, "argocd", cluster)
		switch {
		case err != nil:
			return "error: " + err.Error()
		case rej != nil:
			return rej.Reason
		}
		return "admitted"
	}

	t.Run("few revocations: one shared list answers concurrent requests, and it is live", func(t *testing.T) {
		lifting := metav1.Now()
		// The cache has not seen either revocation yet: the live read must.
		api := &revocationAPI{delay: 20 * time.Millisecond, revoked: map[string]*metav1.Time{"revoked": nil, "lifting": &lifting}}
		r := &Reconciler{Client: &revocationCache{}}
		fresh := newFreshReader(api)
		for cluster, want := range map[string]string{"revoked": ReasonRevoked, "lifting": "admitted", "other": "admitted"} {
			if got := judge(r.liveRevocation(ctx, fresh, "argocd", cluster), cluster); got != want {
				t.Errorf("cluster %s: %s, want %s", cluster, got, want)
			}
		}
		api.lists.Store(0)
		const callers = 64
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i%8) * 7 * time.Millisecond)
				cluster := fmt.Sprintf("cluster-%d", i)
				if got := judge(r.liveRevocation(ctx, fresh, "argocd", cluster), cluster); got != "admitted" {
					t.Errorf("cluster %s: %s", cluster, got)
				}
			}()
		}
		wg.Wait()
		if n := api.lists.Load(); n >= callers/4 || api.gets.Load() != 0 {
			t.Errorf("%d requests for distinct clusters made %d lists and %d reads of one revocation; want a few shared lists and none alone",
				callers, n, api.gets.Load())
		} else {
			t.Logf("%d requests, %d lists", callers, n)
		}
	})

	t.Run("many revocations in the cache: each cluster's own is read", func(t *testing.T) {
		api := &revocationAPI{revoked: map[string]*metav1.Time{"revoked": nil}}
		r := &Reconciler{Client: &revocationCache{cached: sharedRevocationsMax + 1}}
		fresh := newFreshReader(api)
		for cluster, want := range map[string]string{"revoked": ReasonRevoked, "other": "admitted"} {
			if got := judge(r.liveRevocation(ctx, fresh, "argocd", cluster), cluster); got != want {
				t.Errorf("cluster %s: %s, want %s", cluster, got, want)
			}
		}
		if api.lists.Load() != 0 || api.gets.Load() != 2 {
			t.Errorf("%d lists and %d reads of one revocation, want 0 and 2", api.lists.Load(), api.gets.Load())
		}
	})

	t.Run("more live revocations than a page: the cluster's own is read", func(t *testing.T) {
		// The cache lags behind: it shows none, the API server holds more than a page.
		api := &revocationAPI{revoked: map[string]*metav1.Time{}}
		for i := range sharedRevocationsMax + 5 {
			api.revoked[fmt.Sprintf("revoked-%d", i)] = nil
		}
		r := &Reconciler{Client: &revocationCache{}}
		fresh := newFreshReader(api)
		// Whichever names the page left out, each is still refused.
		for i := range sharedRevocationsMax + 5 {
			cluster := fmt.Sprintf("revoked-%d", i)
			if got := judge(r.liveRevocation(ctx, fresh, "argocd", cluster), cluster); got != ReasonRevoked {
				t.Errorf("cluster %s: %s, want %s", cluster, got, ReasonRevoked)
			}
		}
		if got := judge(r.liveRevocation(ctx, fresh, "argocd", "other"), "other"); got != "admitted" {
			t.Errorf("cluster other: %s", got)
		}
		if api.gets.Load() != sharedRevocationsMax+6 {
			t.Errorf("%d reads of one revocation, want one per request (%d)", api.gets.Load(), sharedRevocationsMax+6)
		}
	})
}
