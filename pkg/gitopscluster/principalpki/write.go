package principalpki

import (
	"context"
	"fmt"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// Change is one write the keeper of a principal's PKI decided on: what a non-elder reports
// as pending, and what the elder makes.
type Change struct {
	// Verb is create, update, patch, delete, or replace (delete, then create: a Secret's type
	// cannot change).
	Verb      string
	Kind      string
	Namespace string
	Name      string
}

func (c Change) String() string {
	return fmt.Sprintf("%s %s %s/%s", c.Verb, c.Kind, c.Namespace, c.Name)
}

// write is a Change and how to make it, with the client only apply hands it.
type write struct {
	Change
	make func(ctx context.Context, c client.Client) error
}

// Observer is this keeper for a GitOpsCluster that shares its principal with an elder (keeper
// of the PKI, ownership.Members.Elder): it reads and decides as the elder would, and where the
// elder would write, it writes nothing and stops with a PrincipalPKIPending problem naming that
// write. The principal's PKI is so written by one GitOpsCluster only, and the others use
// exactly what it keeps.
func (k *Keeper) Observer(ns, elder string) *Keeper {
	out := *k
	out.observing = &observed{ns: ns, elder: elder}
	return &out
}

// observed is the principal an Observer keeper watches its elder keep.
type observed struct{ ns, elder string }

// apply is the keeper's only way to write: the elder makes w; an Observer makes nothing and
// reports w, the first write the elder has yet to make, as pending.
func (k *Keeper) apply(ctx context.Context, w write) error {
	if o := k.observing; o != nil {
		pending := w.Change
		return &Problem{Reason: v1alpha1.ReasonPrincipalPKIPending, Pending: &pending, Message: fmt.Sprintf(
			"the PKI of principal namespace %s is kept by its oldest GitOpsCluster %s, which has not yet written what it needs now: %s", o.ns, o.elder, pending)}
	}
	return w.make(ctx, k.Client)
}

func changeOf(verb string, obj client.Object) Change {
	return Change{Verb: verb, Kind: kindOf(obj), Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// kindOf names the kinds the keeper writes; typed objects carry no kind of their own.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *cmapi.Certificate:
		return "Certificate"
	case *appsv1.Deployment:
		return "Deployment"
	}
	return fmt.Sprintf("%T", obj)
}

func create(obj client.Object) write {
	return write{changeOf("create", obj), func(ctx context.Context, c client.Client) error { return c.Create(ctx, obj) }}
}

func update(obj client.Object) write {
	return write{changeOf("update", obj), func(ctx context.Context, c client.Client) error { return c.Update(ctx, obj) }}
}

func patch(obj client.Object, p client.Patch) write {
	return write{changeOf("patch", obj), func(ctx context.Context, c client.Client) error { return c.Patch(ctx, obj, p) }}
}

// remove deletes obj; one already gone is no error.
func remove(obj client.Object) write {
	return write{changeOf("delete", obj), func(ctx context.Context, c client.Client) error { return client.IgnoreNotFound(c.Delete(ctx, obj)) }}
}

// secretWrite creates desired, or replaces the data of existing (type is immutable). The
// object written is built from desired when the write is made, so that what only a write
// needs (a JWT signing key) is made then.
func secretWrite(existing, desired *corev1.Secret) write {
	switch {
	case existing == nil:
		return create(desired)
	case existing.Type != desired.Type:
		return write{changeOf("replace", desired), func(ctx context.Context, c client.Client) error {
			if err := remove(existing).make(ctx, c); err != nil {
				return err
			}
			return c.Create(ctx, desired)
		}}
	}
	return write{changeOf("update", desired), func(ctx context.Context, c client.Client) error {
		updated := existing.DeepCopy()
		updated.Data = desired.Data
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		for key, val := range desired.Labels {
			updated.Labels[key] = val
		}
		if updated.Annotations == nil && len(desired.Annotations) > 0 {
			updated.Annotations = map[string]string{}
		}
		for key, val := range desired.Annotations {
			updated.Annotations[key] = val
		}
		return c.Update(ctx, updated)
	}}
}
