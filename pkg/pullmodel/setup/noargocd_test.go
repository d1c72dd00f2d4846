package setup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/internal/pulltest"
	pullmodelsetup "github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestHubWithoutArgoCD: on a hub without Argo CD's CRDs the manager starts cleanly, says the
// pull model waits (log line, metric 0), and starts it, without a restart, once Argo CD's CRDs
// are installed: a marked Application is then delivered.
func TestHubWithoutArgoCD(t *testing.T) {
	bare := testenv.StartForTest(t, testenv.Options{})
	// As a manager that ran the pull model would have left it: the 0 below is then this
	// manager's own report, not the gauge's initial value.
	pullmodelsetup.SetEnabledForTest(1)
	stop := pulltest.StartManager(bare, func(o *manager.Options) { o.PullModel.DetectInterval = 500 * time.Millisecond })
	defer stop()
	poll.UntilState(t, "the log line saying the pull model waits", 10*time.Second, func(context.Context) (bool, string) {
		return strings.Contains(logs.String(), "the basic pull model waits"), "no such line"
	})
	poll.UntilState(t, "metric "+pullmodelsetup.MetricEnabled+" at 0", 10*time.Second, func(context.Context) (bool, string) {
		v := gauge(t, pullmodelsetup.MetricEnabled)
		return v == 0, fmt.Sprint(v)
	})
	// Still running, and the GitOpsCluster controllers with it: the GitOpsCluster CRD is served.
	time.Sleep(time.Second)

	dir, err := testenv.ArgoCDCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(bare.Config, envtest.CRDInstallOptions{Paths: []string{dir}, MaxTime: time.Minute}); err != nil {
		t.Fatalf("installing Argo CD's CRDs: %v", err)
	}
	ctx := context.Background()
	c := bare.Client
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pulltest.ArgoNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late1"}},
		pulltest.ManagedCluster("late1"),
		pulltest.NewApp("late-guestbook", "late1"),
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := pulltest.TenancySteps(ctx, c); err != nil {
		t.Fatal(err)
	}
	poll.UntilState(t, "the Application delivered after Argo CD's CRDs appeared", 30*time.Second, func(ctx context.Context) (bool, string) {
		list := &workv1.ManifestWorkList{}
		if err := c.List(ctx, list, client.InNamespace("late1"), client.HasLabels{pullmodel.LabelPull}); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 1, fmt.Sprint(len(list.Items), " works")
	})
	if v := gauge(t, pullmodelsetup.MetricEnabled); v != 1 {
		t.Errorf("metric %s = %v after start, want 1", pullmodelsetup.MetricEnabled, v)
	}
}

// gauge reads a gauge of the controller-runtime registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) > 0 {
			return gaugeValue(mf.Metric[0])
		}
	}
	return -1
}

func gaugeValue(m *dto.Metric) float64 { return m.GetGauge().GetValue() }
