package clustersecrets

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/selection"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// TestRegistrationsCountedWhenAnotherWriteFails: a pass whose write for one cluster fails
// still counts the agents it did register, since their secrets stay written and the next pass
// finds them current (it would never count them).
func TestRegistrationsCountedWhenAnotherWriteFails(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	refused := agentsecret.Name("refused")
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Secret); ok && obj.GetName() == refused {
				return errors.New("refused by the test")
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	ca, err := pki.NewCA("test CA", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	w := &Writer{Hub: config.Hub{Client: c, Reader: c, Config: config.Default()}}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "gitops", Name: "fleet"}}
	obs := &selection.Observation{Owned: sets.New("written", "refused")}
	before := testutil.ToFloat64(agentsRegistered)
	_, err = w.Sync(context.Background(), goc, "argocd", obs, &principalpki.PKI{CA: ca, Bundle: ca.CertPEM}, nil, nil,
		ledger.Store{Client: c, Reader: c, Namespace: "argocd"})
	if err == nil {
		t.Fatal("Sync returned no error for a refused write")
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "argocd", Name: agentsecret.Name("written")}, &corev1.Secret{}); err != nil {
		t.Fatalf("the other cluster's secret: %v", err)
	}
	if got := testutil.ToFloat64(agentsRegistered) - before; got != 1 {
		t.Errorf("agents registered counted %v, want 1 (the written cluster)", got)
	}
}
