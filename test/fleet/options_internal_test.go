package fleet

import (
	"context"
	"strings"
	"testing"
)

// TestStartRefusesFlagsForAnUnknownHubController: a misspelt controller name in
// HubControllerArgs would otherwise drop the flags without a word, and a benchmark would
// measure OCM's defaults while its command line says otherwise.
func TestStartRefusesFlagsForAnUnknownHubController(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Dir: dir, HubControllerArgs: map[string][]string{"addon-manger": {"--kube-api-qps=500"}}})
	if err == nil || !strings.Contains(err.Error(), `"addon-manger"`) {
		t.Fatalf("Start: %v, want an error naming the unknown controller", err)
	}
}
