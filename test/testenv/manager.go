package testenv

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
)

// StartManager starts against cfg a manager built like the binary's (its cache, client and
// controller options, and Setup), so that a test sees the cache a user runs. Only what a test
// cannot have is changed: no serving ports, no leader election, and controller names may repeat
// (a test may start a second manager in the process). It returns the manager's stop.
func StartManager(cfg *rest.Config, scheme *runtime.Scheme, opts manager.Options) (stop func(), err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	mo := manager.ControllerOptions(scheme, opts)
	mo.Metrics = metricsserver.Options{BindAddress: "0"}
	mo.HealthProbeBindAddress = "0"
	mo.PprofBindAddress = ""
	mo.LeaderElection = false
	mo.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := manager.Setup(ctx, mgr, opts); err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
