package gitopscluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
)

// recordingQueue remembers what was enqueued, and after how long.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []time.Duration
}

func (q *recordingQueue) Add(reconcile.Request) { q.added = append(q.added, 0) }
func (q *recordingQueue) AddAfter(_ reconcile.Request, d time.Duration) {
	q.added = append(q.added, d)
}

// TestLedgerWritesOfKeptClustersWakeNoPass: a ledger written for a cluster whose secret the
// cache holds, from the ledger's owner and not being deleted, wakes no pass; every other
// ledger write, and every deletion, wakes its owner after ledgerSettle, and a change of the
// revocation record at once.
func TestLedgerWritesOfKeptClustersWakeNoPass(t *testing.T) {
	const ns = "argocd"
	owner := map[string]string{v1alpha1.LabelOwnerNamespace: "team-a", v1alpha1.LabelOwnerName: "fleet"}
	ledgerOf := func(cluster string, labels map[string]string) *corev1.ConfigMap {
		l := map[string]string{ledger.LabelRecord: ledger.RecordLedger, ledger.LabelCluster: cluster}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledger.LedgerName(cluster), Labels: l}}
	}
	secretOf := func(cluster string, labels map[string]string, deleting bool) *corev1.Secret {
		l := map[string]string{v1alpha1.LabelAgentName: cluster}
		for k, v := range labels {
			l[k] = v
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsecret.Name(cluster), Labels: l}}
		if deleting {
			s.DeletionTimestamp, s.Finalizers = &metav1.Time{Time: time.Now()}, []string{v1alpha1.FinalizerRecordCertificate}
		}
		return s
	}
	other := map[string]string{v1alpha1.LabelOwnerNamespace: "team-b", v1alpha1.LabelOwnerName: "fleet"}
	// A secret named for one cluster whose agent label names another.
	relabelled := secretOf("relabelled", owner, false)
	relabelled.Labels[v1alpha1.LabelAgentName] = "kept"
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cached := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secretOf("kept", owner, false),
		secretOf("handed-over", other, false),
		secretOf("going", owner, true),
		relabelled,
	).Build()
	r := &Reconciler{Client: cached}
	h := recordsChanged(forOwnerLabels, r.wakes().ledgerChangeMayRevoke)
	created := func(ctx context.Context, cm *corev1.ConfigMap, q *recordingQueue) {
		h.Create(ctx, event.CreateEvent{Object: cm}, q)
	}
	updated := func(ctx context.Context, cm *corev1.ConfigMap, q *recordingQueue) {
		h.Update(ctx, event.UpdateEvent{ObjectOld: cm.DeepCopy(), ObjectNew: cm}, q)
	}
	deleted := func(ctx context.Context, cm *corev1.ConfigMap, q *recordingQueue) {
		h.Delete(ctx, event.DeleteEvent{Object: cm}, q)
	}

	cases := []struct {
		name string
		cm   *corev1.ConfigMap
		fire func(context.Context, *corev1.ConfigMap, *recordingQueue)
		want []time.Duration
	}{
		{"kept cluster, created", ledgerOf("kept", owner), created, nil},
		{"kept cluster, updated", ledgerOf("kept", owner), updated, nil},
		{"kept cluster, deleted", ledgerOf("kept", owner), deleted, []time.Duration{ledgerSettle}},
		{"no cluster secret", ledgerOf("departed", owner), updated, []time.Duration{ledgerSettle}},
		{"cluster secret of another owner", ledgerOf("handed-over", owner), updated, []time.Duration{ledgerSettle}},
		{"cluster secret being deleted", ledgerOf("going", owner), created, []time.Duration{ledgerSettle}},
		{"cluster secret whose agent label names another cluster", ledgerOf("relabelled", owner), updated, []time.Duration{ledgerSettle}},
		{"ledger whose cluster label does not match its name", func() *corev1.ConfigMap {
			cm := ledgerOf("relabelled", owner)
			cm.Labels[ledger.LabelCluster] = "kept"
			return cm
		}(), updated, []time.Duration{ledgerSettle}},
		{"revocation record", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledger.ShardName("a0"),
			Labels: map[string]string{ledger.LabelRecord: ledger.RecordRevoked, v1alpha1.LabelOwnerNamespace: "team-a", v1alpha1.LabelOwnerName: "fleet"}}},
			updated, []time.Duration{0}},
	}
	// A ledger without an owner belongs to every GitOpsCluster of its principal (the real
	// mapping finds them): its writes always may revoke.
	if !r.wakes().ledgerChangeMayRevoke(context.Background(), ledgerOf("kept", nil)) {
		t.Error("a write of a ledger without an owner may not revoke, want it may")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := &recordingQueue{}
			c.fire(context.Background(), c.cm, q)
			if len(q.added) != len(c.want) {
				t.Fatalf("enqueued %v, want %v", q.added, c.want)
			}
			for i := range c.want {
				if q.added[i] != c.want[i] {
					t.Fatalf("enqueued %v, want %v", q.added, c.want)
				}
			}
		})
	}
}
