package fleet

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// busyRetryBudget is how long the harness keeps asking an API server that answers "try again":
// the e2e lanes of real nodes on 2 cores can starve one for tens of seconds (a CRD create has
// come back with "request did not complete within requested timeout" after 60 s).
const busyRetryBudget = 3 * time.Minute

// serverBusy says whether err is an API server's answer that the request may succeed if sent
// again: its own timeouts, throttling and unavailability. Anything else (a refusal, a
// conflict, a missing object) is the caller's to handle.
func serverBusy(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err)
}

// retryBusy runs call until it returns something other than a busy answer, or the next try
// would start after budget (then the last busy answer is returned). A write retried after a
// timeout may find what the first attempt did (AlreadyExists, NotFound): such an answer names
// the busy one before it, and callers treat AlreadyExists as success where that is right.
func retryBusy(ctx context.Context, budget time.Duration, call func() error) error {
	var err, busy error
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Cap: 10 * time.Second, Steps: 1 << 30}
	deadline := time.Now().Add(budget)
	for {
		if err = call(); !serverBusy(err) {
			if err != nil && busy != nil {
				err = fmt.Errorf("%w (sent again after: %v)", err, busy)
			}
			return err
		}
		busy = err
		next := backoff.Step()
		if time.Now().Add(next).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(next):
		}
	}
}

// retryingClient wraps the harness's admin client so that each write a busy API server turned
// away is sent again, as an admin would run the command again. Reads are left alone: the
// harness and the tests read inside polls of their own. The product's clients are not wrapped.
func retryingClient(c client.WithWatch, budget time.Duration) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetName() == "" && obj.GetGenerateName() != "" {
				// Sent again, it could make a second object.
				return c.Create(ctx, obj, opts...)
			}
			return retryBusy(ctx, budget, func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return retryBusy(ctx, budget, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return retryBusy(ctx, budget, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return retryBusy(ctx, budget, func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return retryBusy(ctx, budget, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return retryBusy(ctx, budget, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	})
}
