package fleet

import (
	"context"
	"strings"
	"testing"
)

// TestStartRefusesBadHubControllerArgs: a misspelt controller would drop its flags without a
// word, and a flag the fleet sets itself would replace the fleet's; either way a benchmark's
// command line would say what its OCM did not run with.
func TestStartRefusesBadHubControllerArgs(t *testing.T) {
	// Should the check not hold, Start must fail fast rather than start a fleet: its context is
	// cancelled and its binaries do not exist.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	missing := t.TempDir() + "/missing"
	for _, tc := range []struct {
		args map[string][]string
		want string
	}{
		{map[string][]string{"addon-manger": {"--kube-api-qps=500"}}, `no OCM hub controller named "addon-manger"`},
		{map[string][]string{"addon-manager": {"kube-api-qps=500"}}, `"kube-api-qps=500" is not a --name=value flag`},
		{map[string][]string{"addon-manager": {"--"}}, `"--" is not a --name=value flag`},
		{map[string][]string{"placement-controller": {"--disable-leader-election=false"}}, "the fleet sets --disable-leader-election itself"},
		{map[string][]string{"registration-controller": {"--kubeconfig=/tmp/other"}}, "the fleet sets --kubeconfig itself"},
	} {
		_, err := Start(ctx, Options{Dir: t.TempDir(), K8sBinDir: missing, OCMBinDir: missing, HubControllerArgs: tc.args})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: Start: %v, want an error saying %s", tc.args, err, tc.want)
		}
	}
	if err := checkHubControllerArgs(map[string][]string{"addon-manager": {"--kube-api-qps=500", "--kube-api-burst=1000"}}); err != nil {
		t.Errorf("OCM's own flags refused: %v", err)
	}
}
