package clusters

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// forbiddenSecrets is an API reader whose Secret reads fail as RBAC makes them fail outside the
// managed namespaces.
type forbiddenSecrets struct{ client.Reader }

func (f forbiddenSecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.SecretList); ok {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	}
	return f.Reader.List(ctx, list, opts...)
}

// A registration in a namespace the manager may not write Secrets in is told so, gets no
// finalizer, and one left from when the namespace was managed does not block its deletion.
func TestRegistrationOutsideTheManagedNamespaces(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	fresh := &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "fresh"},
		Spec: v1alpha1.ArgoCDClusterRegistrationSpec{PlacementRef: v1alpha1.PlacementReference{Name: "p"}}}
	leaving := &v1alpha1.ArgoCDClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "leaving",
		Finalizers: []string{Finalizer}, DeletionTimestamp: &now}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fresh, leaving).WithStatusSubresource(fresh).Build()
	r := &Reconciler{Client: c, APIReader: forbiddenSecrets{c}, ManagedNamespaces: []string{"argocd"}}
	ctx := context.Background()

	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "fresh"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.ArgoCDClusterRegistration{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(fresh), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, ConditionReady)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNamespaceNotManaged || !strings.Contains(cond.Message, "managedNamespaces") {
		t.Fatalf("Ready = %+v", cond)
	}
	if len(got.Finalizers) > 0 {
		t.Fatalf("finalizer added in an unmanaged namespace: %v", got.Finalizers)
	}

	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "leaving"}}); err != nil {
		t.Fatalf("deletion blocked: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(leaving), &v1alpha1.ArgoCDClusterRegistration{}); !apierrors.IsNotFound(err) {
		t.Fatalf("registration not released: %v", err)
	}
}
