package clusters_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	level := zapcore.ErrorLevel
	if os.Getenv("TEST_VERBOSE") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	var err error
	env, err = testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	opts := manager.DefaultOptions()
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	opts.PullModel.RegistrationGrace = grace
	stop, err := testenv.StartManager(env.Config, k8s.Scheme(), opts)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	stop()
	_ = env.Stop()
	os.Exit(code)
}

func createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createManagedCluster(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
	if err := k8s.Create(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

func setClusterLabels(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	mc.Labels = labels
	if err := k8s.Update(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
}

func createPlacement(t *testing.T, ns, name string) {
	t.Helper()
	if err := k8s.Create(context.Background(), &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// setDecisions writes page 0 of placement's decisions.
func setDecisions(t *testing.T, ns, placement string, clusters ...string) {
	t.Helper()
	if err := fakehub.SetDecisionPage(context.Background(), k8s, ns, placement, 0, clusters); err != nil {
		t.Fatal(err)
	}
}

func createRegistration(t *testing.T, ns, name, placement string) {
	t.Helper()
	reg := &v1alpha1.ArgoCDClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.ArgoCDClusterRegistrationSpec{PlacementRef: v1alpha1.PlacementReference{Name: placement}},
	}
	if err := k8s.Create(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	poll.Until(t, what, 30*time.Second, check)
}

func getSecret(ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	return s, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
}

func readyIs(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *v1alpha1.ArgoCDClusterRegistration {
	t.Helper()
	reg := &v1alpha1.ArgoCDClusterRegistration{}
	eventually(t, fmt.Sprintf("%s/%s Ready=%s (%s)", ns, name, status, reason), func() error {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, reg); err != nil {
			return err
		}
		c := meta.FindStatusCondition(reg.Status.Conditions, "Ready")
		if c == nil {
			return fmt.Errorf("no Ready condition yet")
		}
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != reg.Generation {
			return fmt.Errorf("Ready is %s/%s (generation %d of %d): %s", c.Status, c.Reason, c.ObservedGeneration, reg.Generation, c.Message)
		}
		return nil
	})
	return reg
}
