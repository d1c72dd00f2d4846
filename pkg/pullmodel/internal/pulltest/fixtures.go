package pulltest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/seal"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
)

// ClusterSet is the ManagedClusterSet of the tests' clusters, bound to the hub Argo CD
// namespace.
const ClusterSet = "pull-tests"

// TenancySteps are what a hub admin does before the pull model delivers anything: the hub
// Argo CD's default AppProject (argocd-server creates it on a real hub), and a
// ManagedClusterSet bound to the hub Argo CD namespace.
func TenancySteps(ctx context.Context, c client.Client) error {
	return ensure(ctx, c,
		AppProject(ArgoNS, "default", nil),
		&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: ClusterSet}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ArgoNS, Name: ClusterSet}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: ClusterSet}},
	)
}

// ensure creates each object that does not exist yet.
func ensure(ctx context.Context, c client.Client, objs ...client.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// ManagedCluster is an accepted ManagedCluster in the tests' cluster set.
func ManagedCluster(name string) *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: ClusterSet}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
}

// AppProject returns a hub AppProject; spec nil permits every repository and destination.
func AppProject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	p := pullmodel.NewApplication()
	p.SetKind("AppProject")
	p.SetNamespace(ns)
	p.SetName(name)
	if spec == nil {
		spec = map[string]any{"sourceRepos": []any{"*"}, "destinations": []any{map[string]any{"server": "*", "namespace": "*"}}}
	}
	p.Object["spec"] = spec
	return p
}

// NewApp returns a hub Application of the hub Argo CD namespace marked for cluster, with
// skip-reconcile, a label and an annotation of its author's.
func NewApp(name, cluster string) *unstructured.Unstructured {
	app := pullmodel.NewApplication()
	app.SetNamespace(ArgoNS)
	app.SetName(name)
	app.SetLabels(map[string]string{pullmodel.LabelPull: "true", "team": "blue"})
	app.SetAnnotations(map[string]string{
		pullmodel.AnnotationCluster:       cluster,
		pullmodel.AnnotationSkipReconcile: "true",
		"note":                            "kept",
	})
	app.Object["spec"] = map[string]any{
		"project": "default",
		"source":  map[string]any{"repoURL": "https://git.example/guestbook", "path": "guestbook", "targetRevision": "main"},
		"destination": map[string]any{
			"name":      "in-cluster-on-hub",
			"namespace": "guestbook",
		},
		"syncPolicy": map[string]any{"automated": map[string]any{"prune": true}},
	}
	return app
}

// Create creates o, failing the test if it cannot.
func (s *Suite) Create(t testing.TB, o client.Object) {
	t.Helper()
	s.need(t)
	if err := s.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

// Ensure creates each object that does not exist yet: fixtures several tests set up.
func (s *Suite) Ensure(t testing.TB, objs ...client.Object) {
	t.Helper()
	s.need(t)
	if err := ensure(context.Background(), s.Client, objs...); err != nil {
		t.Fatal(err)
	}
}

// GetApp reads the hub Application name of the hub Argo CD namespace.
func (s *Suite) GetApp(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	s.need(t)
	app := pullmodel.NewApplication()
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ArgoNS, Name: name}, app); err != nil {
		t.Fatalf("reading Application %s: %v", name, err)
	}
	return app
}

// CreateCluster registers a ManagedCluster (accepted or not) in the tests' cluster set, and
// its hub namespace.
func (s *Suite) CreateCluster(t testing.TB, name string, accepted bool) {
	t.Helper()
	s.CreateClusterInSet(t, name, accepted, ClusterSet)
}

// CreateClusterInSet registers a ManagedCluster in a set, and its hub namespace.
func (s *Suite) CreateClusterInSet(t testing.TB, name string, accepted bool, set string) {
	t.Helper()
	s.Ensure(t,
		&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{clusterv1beta2.ClusterSetLabel: set}}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: accepted}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
	)
}

// SetAvailable writes a ManagedCluster's Available condition, as OCM's registration controller
// does from the cluster's lease.
func (s *Suite) SetAvailable(t testing.TB, name string, available bool) {
	t.Helper()
	s.need(t)
	ctx := context.Background()
	mc := &clusterv1.ManagedCluster{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: clusterv1.ManagedClusterConditionAvailable, Status: status, Reason: "Test", Message: "set by the test"})
	if err := s.Client.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
}

// NewAppSet creates a minimal ApplicationSet in the hub Argo CD namespace (nothing runs it
// here).
func (s *Suite) NewAppSet(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	return s.NewAppSetIn(t, ArgoNS, name, "default")
}

// NewAppSetIn creates an ApplicationSet in namespace ns whose template names project.
func (s *Suite) NewAppSetIn(t testing.TB, ns, name, project string) *unstructured.Unstructured {
	t.Helper()
	set := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"generators": []any{map[string]any{"list": map[string]any{"elements": []any{}}}},
			"template": map[string]any{
				"metadata": map[string]any{"name": "{{name}}"},
				"spec":     map[string]any{"project": project, "destination": map[string]any{"server": pullmodel.InClusterServer}},
			},
		},
	}}
	set.SetGroupVersionKind(pullmodel.ApplicationSetGVK)
	set.SetNamespace(ns)
	set.SetName(name)
	s.Create(t, set)
	return set
}

// Sealer is the manager's sealer, made from the key it keeps in its Secret: what a test seals
// with it passes for the manager's own.
func (s *Suite) Sealer(t testing.TB) *seal.Sealer {
	t.Helper()
	s.need(t)
	key, err := seal.LoadOrCreateKey(context.Background(), s.Client, s.Client, setup.DefaultConfig().SealSecret)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return sealer
}
