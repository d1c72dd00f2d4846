package signer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// revocationAPI stands for the API server's AgentRevocations: a list of their metadata, all
// of them or those of one name, that takes delay and pages at the limit asked for.
type revocationAPI struct {
	client.Reader
	delay   time.Duration
	mu      sync.Mutex
	revoked map[types.NamespacedName]*metav1.Time // deletion timestamp (nil: not being deleted)
	lists   atomic.Int64
	named   atomic.Int64
}

// in makes the revocations of names in namespace ns, none being deleted.
func in(ns string, names ...string) map[types.NamespacedName]*metav1.Time {
	out := map[types.NamespacedName]*metav1.Time{}
	for _, n := range names {
		out[types.NamespacedName{Namespace: ns, Name: n}] = nil
	}
	return out
}

func (a *revocationAPI) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	name := ""
	if o.FieldSelector != nil {
		v, ok := o.FieldSelector.RequiresExactMatch("metadata.name")
		if !ok {
			return fmt.Errorf("field selector %s", o.FieldSelector)
		}
		name = v
		a.named.Add(1)
	} else {
		a.lists.Add(1)
	}
	if o.Namespace != "" {
		return fmt.Errorf("listed namespace %s only; a revocation holds on every principal", o.Namespace)
	}
	time.Sleep(a.delay)
	a.mu.Lock()
	defer a.mu.Unlock()
	l := list.(*metav1.PartialObjectMetadataList)
	if l.GroupVersionKind() != v1alpha1.GroupVersion.WithKind("AgentRevocationList") {
		return fmt.Errorf("listed %s, want AgentRevocations' metadata", l.GroupVersionKind())
	}
	for key, deleted := range a.revoked {
		if name != "" && key.Name != name {
			continue
		}
		if o.Limit > 0 && int64(len(l.Items)) == o.Limit {
			l.Continue = "more"
			break
		}
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, DeletionTimestamp: deleted}})
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
		// The cache has not seen any of them yet: the live read must. One is on another
		// principal, and holds here too.
		revoked := in("argocd", "revoked")
		revoked[types.NamespacedName{Namespace: "argocd", Name: "lifting"}] = &lifting
		revoked[types.NamespacedName{Namespace: "other-principal", Name: "elsewhere"}] = nil
		api := &revocationAPI{delay: 20 * time.Millisecond, revoked: revoked}
		r := &Reconciler{Client: &revocationCache{}}
		fresh := newFreshReader(api)
		for cluster, want := range map[string]string{"revoked": ReasonRevoked, "elsewhere": ReasonRevoked, "lifting": "admitted", "other": "admitted"} {
			if got := judge(r.liveRevocation(ctx, fresh, cluster), cluster); got != want {
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
				if got := judge(r.liveRevocation(ctx, fresh, cluster), cluster); got != "admitted" {
					t.Errorf("cluster %s: %s", cluster, got)
				}
			}()
		}
		wg.Wait()
		if n := api.lists.Load(); n >= callers/4 || api.named.Load() != 0 {
			t.Errorf("%d requests for distinct clusters made %d lists and %d reads of one cluster's revocations; want a few shared lists and none alone",
				callers, n, api.named.Load())
		} else {
			t.Logf("%d requests, %d lists", callers, n)
		}
	})

	t.Run("a revocation in a namespace the manager does not serve refuses nothing", func(t *testing.T) {
		api := &revocationAPI{revoked: in("tenant", "victim")}
		r := &Reconciler{Client: &revocationCache{}, Config: Config{NamespaceServed: func(ns string) bool { return ns != "tenant" }}}
		if got := judge(r.liveRevocation(ctx, newFreshReader(api), "victim"), "victim"); got != "admitted" {
			t.Errorf("cluster victim: %s, want admitted", got)
		}
	})

	t.Run("many revocations in the cache: each cluster's own are read", func(t *testing.T) {
		api := &revocationAPI{revoked: in("other-principal", "revoked")}
		r := &Reconciler{Client: &revocationCache{cached: sharedRevocationsMax + 1}}
		fresh := newFreshReader(api)
		for cluster, want := range map[string]string{"revoked": ReasonRevoked, "other": "admitted"} {
			if got := judge(r.liveRevocation(ctx, fresh, cluster), cluster); got != want {
				t.Errorf("cluster %s: %s, want %s", cluster, got, want)
			}
		}
		if api.lists.Load() != 0 || api.named.Load() != 2 {
			t.Errorf("%d lists of all and %d of one cluster's revocations, want 0 and 2", api.lists.Load(), api.named.Load())
		}
	})

	t.Run("more live revocations than a page: the cluster's own are read", func(t *testing.T) {
		// The cache lags behind: it shows none, the API server holds more than a page.
		api := &revocationAPI{revoked: map[types.NamespacedName]*metav1.Time{}}
		for i := range sharedRevocationsMax + 5 {
			api.revoked[types.NamespacedName{Namespace: fmt.Sprintf("principal-%d", i%3), Name: fmt.Sprintf("revoked-%d", i)}] = nil
		}
		r := &Reconciler{Client: &revocationCache{}}
		fresh := newFreshReader(api)
		// Whichever names the page left out, each is still refused.
		for i := range sharedRevocationsMax + 5 {
			cluster := fmt.Sprintf("revoked-%d", i)
			if got := judge(r.liveRevocation(ctx, fresh, cluster), cluster); got != ReasonRevoked {
				t.Errorf("cluster %s: %s, want %s", cluster, got, ReasonRevoked)
			}
		}
		if got := judge(r.liveRevocation(ctx, fresh, "other"), "other"); got != "admitted" {
			t.Errorf("cluster other: %s", got)
		}
		if api.named.Load() != sharedRevocationsMax+6 {
			t.Errorf("%d reads of one cluster's revocations, want one per request (%d)", api.named.Load(), sharedRevocationsMax+6)
		}
	})
}
