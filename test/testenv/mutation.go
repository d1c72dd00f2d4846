package testenv

import (
	"os"

	// Its init reads CacheMutationDetectorVar; importing it makes it run before this package's.
	_ "k8s.io/client-go/tools/cache"
)

// CacheMutationDetectorVar turns on client-go's cache mutation detector: every object an
// informer stores is copied, and the process panics ("cache ... modified") when the stored
// object stops matching its copy. `make test` sets it, so a test of code that changes a cached
// object in place (which the manager's cache, sharing strings and small maps between objects,
// must never see) crashes instead of passing.
const CacheMutationDetectorVar = "KUBE_CACHE_MUTATION_DETECTOR"

// cacheMutationDetector is the variable as this process started with it. client-go read it
// when it was initialised; it is then taken out of the environment, so the API servers, etcd,
// OCM and Argo CD this process starts run as they would anywhere, and only the project's own
// binaries get it back (ProjectProcessEnv).
var cacheMutationDetector = os.Getenv(CacheMutationDetectorVar)

func init() { _ = os.Unsetenv(CacheMutationDetectorVar) }

// ProjectProcessEnv is what a test adds to the environment of a process of the project's own
// binary: the cache mutation detector when the tests run with it, and an empty GOGC, so that
// the binary collects garbage at its own default (pkg/cmd) whatever GOGC the tests run with
// (make test sets one for its own processes).
func ProjectProcessEnv() []string {
	env := []string{"GOGC="}
	if cacheMutationDetector != "" {
		env = append(env, CacheMutationDetectorVar+"="+cacheMutationDetector)
	}
	return env
}
