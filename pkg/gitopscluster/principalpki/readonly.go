package principalpki

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// ReadOnly is this keeper for a GitOpsCluster that shares its principal with an elder (keeper
// of the PKI, fleet.Members.Elder): it reads and decides as the elder would, and where the
// elder would write, it stops with a PrincipalPKIPending problem instead. The principal's PKI is
// so written by one GitOpsCluster only, and the others use exactly what it keeps.
func (k *Keeper) ReadOnly(ns, elder string) *Keeper {
	out := *k
	out.Client = readOnlyClient{Client: k.Client, pending: &Problem{Reason: v1alpha1.ReasonPrincipalPKIPending, Message: fmt.Sprintf(
		"the PKI of principal namespace %s is kept by its oldest GitOpsCluster %s, which has not yet written what it needs now", ns, elder)}}
	return &out
}

// readOnlyClient reads through Client and refuses every write with pending.
type readOnlyClient struct {
	client.Client
	pending *Problem
}

func (c readOnlyClient) Create(context.Context, client.Object, ...client.CreateOption) error {
	return c.pending
}

func (c readOnlyClient) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return c.pending
}

func (c readOnlyClient) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return c.pending
}

func (c readOnlyClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return c.pending
}

func (c readOnlyClient) Delete(context.Context, client.Object, ...client.DeleteOption) error {
	return c.pending
}

func (c readOnlyClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return c.pending
}

func (c readOnlyClient) Status() client.SubResourceWriter {
	return readOnlySubResource{pending: c.pending}
}

// SubResource reads a subresource through Client and refuses its writes: a read is no
// write the elder has yet to make.
func (c readOnlyClient) SubResource(name string) client.SubResourceClient {
	return readOnlySubResource{reader: c.Client.SubResource(name), pending: c.pending}
}

type readOnlySubResource struct {
	reader  client.SubResourceReader
	pending *Problem
}

func (s readOnlySubResource) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	return s.reader.Get(ctx, obj, subResource, opts...)
}

func (s readOnlySubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return s.pending
}

func (s readOnlySubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return s.pending
}

func (s readOnlySubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return s.pending
}

func (s readOnlySubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return s.pending
}
