package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A write the API server answered with "try again" is sent again; a refusal is not.
func TestRetryingClientSendsBusyWritesAgain(t *testing.T) {
	gr := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	for name, tc := range map[string]struct {
		answers   []error
		wantCalls int
		wantErr   func(error) bool
	}{
		"request timeout, then created":  {[]error{apierrors.NewTimeoutError("request did not complete within requested timeout", 0), nil}, 2, nil},
		"server timeout, then created":   {[]error{apierrors.NewServerTimeout(gr, "create", 1), nil}, 2, nil},
		"throttled twice, then created":  {[]error{apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0), nil}, 3, nil},
		"unavailable, then created":      {[]error{apierrors.NewServiceUnavailable("starting"), nil}, 2, nil},
		"created by the timed-out try":   {[]error{apierrors.NewTimeoutError("request did not complete within requested timeout", 0), apierrors.NewAlreadyExists(gr, "x")}, 2, apierrors.IsAlreadyExists},
		"already exists: not sent again": {[]error{apierrors.NewAlreadyExists(gr, "x")}, 1, apierrors.IsAlreadyExists},
		"forbidden: not sent again":      {[]error{apierrors.NewForbidden(gr, "x", nil)}, 1, apierrors.IsForbidden},
		"still busy when the budget ends": {[]error{apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0),
			apierrors.NewTooManyRequests("slow down", 0), apierrors.NewTooManyRequests("slow down", 0)}, 2, apierrors.IsTooManyRequests},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			answer := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				calls++
				if err := tc.answers[min(calls, len(tc.answers))-1]; err != nil {
					return err
				}
				return c.Create(ctx, obj, opts...)
			}
			base := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{Create: answer})
			// The last case's budget lets the first retry (after 500 ms) through and not the
			// second (1 s later).
			budget := time.Minute
			if name == "still busy when the budget ends" {
				budget = 1400 * time.Millisecond
			}
			err := retryingClient(base, budget).Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if err != nil && calls > 1 && !serverBusy(err) && !strings.Contains(err.Error(), "sent again after") {
				t.Errorf("err = %v does not name the busy answer before it", err)
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("err = %v, want success", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("err = %v, not the expected kind", err)
			}
		})
	}
}

// A caller whose own context ends is not kept waiting for the budget.
func TestRetryingClientStopsWithTheCallersContext(t *testing.T) {
	base := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return apierrors.NewTooManyRequests("slow down", 0)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := retryingClient(base, time.Hour).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("err = %v", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("returned after %s, past the caller's deadline", waited)
	}
}

// A Create by generateName is sent once: a second try could make a second object.
func TestRetryingClientSendsAGeneratedNameOnce(t *testing.T) {
	calls := 0
	base := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			calls++
			return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
		},
	})
	err := retryingClient(base, time.Minute).Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}})
	if !apierrors.IsTimeout(err) || calls != 1 {
		t.Errorf("err = %v after %d call(s), want the timeout after one", err, calls)
	}
}
