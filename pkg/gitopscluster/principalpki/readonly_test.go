package principalpki

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// TestReadOnlyKeeperReadsAndRefusesWrites: the keeper of a GitOpsCluster that is not its
// principal's elder reads everything, subresources included, and every write it would make
// is refused with PrincipalPKIPending, naming the elder.
func TestReadOnlyKeeperReadsAndRefusesWrites(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "ca"}}
	subResourceReads := 0
	c := fake.NewClientBuilder().WithObjects(secret).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceGet: func(context.Context, client.Client, string, client.Object, client.Object, ...client.SubResourceGetOption) error {
			subResourceReads++
			return nil
		},
	}).Build()
	k := (&Keeper{Hub: config.Hub{Client: c, Reader: c}}).ReadOnly("argocd", "platform/fleet")

	if err := k.Client.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err != nil {
		t.Errorf("Get: %v", err)
	}
	if err := k.Client.SubResource("status").Get(ctx, secret, &corev1.Secret{}); err != nil || subResourceReads != 1 {
		t.Errorf("SubResource Get: %v after %d reads through; want the read passed through", err, subResourceReads)
	}

	pending := func(what string, err error) {
		t.Helper()
		var p *Problem
		if !errors.As(err, &p) || p.Reason != v1alpha1.ReasonPrincipalPKIPending {
			t.Errorf("%s: want PrincipalPKIPending, got %v", what, err)
		}
	}
	fresh := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "new"}}
	}
	pending("Create", k.Client.Create(ctx, fresh()))
	pending("Update", k.Client.Update(ctx, secret.DeepCopy()))
	pending("Patch", k.Client.Patch(ctx, secret.DeepCopy(), client.MergeFrom(secret)))
	pending("Delete", k.Client.Delete(ctx, secret.DeepCopy()))
	pending("DeleteAllOf", k.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("argocd")))
	pending("Status().Update", k.Client.Status().Update(ctx, secret.DeepCopy()))
	pending("Status().Patch", k.Client.Status().Patch(ctx, secret.DeepCopy(), client.MergeFrom(secret)))
	pending("SubResource Create", k.Client.SubResource("eviction").Create(ctx, secret.DeepCopy(), &corev1.Secret{}))
	pending("SubResource Update", k.Client.SubResource("status").Update(ctx, secret.DeepCopy()))

	// Nothing was written.
	var list corev1.SecretList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != 1 {
		t.Errorf("secrets after the refused writes: %d (%v), want the one there was", len(list.Items), err)
	}
}

// TestReadOnlyKeeperMakesNoJWTKey: where the elder has yet to write the JWT signing key, the
// read-only keeper stops with PrincipalPKIPending before making a key it could not write, and
// leaves the manager's spare key to the elder.
func TestReadOnlyKeeperMakesNoJWTKey(t *testing.T) {
	made := 0
	keys := &pki.SpareKey{New: func() ([]byte, error) { made++; return pki.NewJWTSigningKey() }}
	c := fake.NewClientBuilder().Build()
	elder := &Keeper{Hub: config.Hub{Client: c, Reader: c}, JWTKeys: keys}
	k := elder.ReadOnly("argocd", "platform/fleet")
	err := k.ensureJWTKey(context.Background(), "argocd", &PKI{})
	var p *Problem
	if !errors.As(err, &p) || p.Reason != v1alpha1.ReasonPrincipalPKIPending {
		t.Errorf("ensureJWTKey: want PrincipalPKIPending, got %v", err)
	}
	if made != 0 {
		t.Errorf("%d keys made, want none", made)
	}

	// With the elder's key in place, there is nothing to write and nothing is refused.
	key, err := pki.NewJWTSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	c = fake.NewClientBuilder().WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: names.JWTSecretName, Labels: names.ManagedLabels()},
		Data:       map[string][]byte{names.JWTSecretKey: key},
	}).Build()
	k = (&Keeper{Hub: config.Hub{Client: c, Reader: c}}).ReadOnly("argocd", "platform/fleet")
	if err := k.ensureJWTKey(context.Background(), "argocd", &PKI{}); err != nil {
		t.Errorf("ensureJWTKey with the elder's key in place: %v, want nil", err)
	}
}
