// Command fleet benchmarks the GitOpsCluster reconciler on a real API server: for each fleet
// size it creates N ManagedClusters with PlacementDecisions (and ManagedClusterAddOns reporting
// Available, standing in for OCM's addon-manager), starts the manager binary as a process,
// applies a GitOpsCluster and prints time to Ready, API writes per cluster as counted by the
// API server's own metrics (the components' probes counted apart), writes during an idle
// period, one join, a renewal wave, and the manager's peak memory; each size runs --runs
// times on a new API server, and the median and spread of the runs are printed.
//
// The hub is made realistic: every cluster namespace also holds other addons'
// ManagedClusterAddOns and a few unrelated Secrets and ConfigMaps, so the cache's memory is
// honest. Every figure is held against a raw pace measured in the same run: N Secrets of the
// shape and size of the manager's cluster secrets created by a plain client (no rate limit,
// 16 writers), once without and once with an informer on them (the watch fan-out any
// controller adds), and again once the fleet is deleted, to show how far the machine's pace
// moved. Beside the wall-clock ratios it prints CPU-seconds, which move less with the
// machine's other load: the API server's and etcd's per registered cluster against per raw
// create, the manager's per registered cluster, per renewed certificate and per idle minute,
// and an accounting of the API server's requests, watch events and (with --profiles) its CPU
// by kind of work. The manager runs as the chart installs it: its ServiceAccount, with the
// chart's RBAC and arguments (--admin: system:masters). The output is appended to --results.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/bench/internal/benchkit"
)

const (
	namespace = "bench"
	addonName = "argocd-agent-addon"
	// gitOpsClusterName is the benchmark's one GitOpsCluster; the raw Secrets carry its owner
	// labels too.
	gitOpsClusterName = "fleet"
)

func main() {
	sizes := flag.String("clusters", "100,1000,5000", "comma-separated fleet sizes")
	idle := flag.Duration("idle", 2*time.Minute, "how long to watch an idle fleet for writes")
	binary := flag.String("manager", "bin/argocd-agent-addon", "path of the manager binary")
	runs := flag.Int("runs", 3, "how many times each size runs, each on a new API server; the median and spread of the runs are printed")
	results := benchkit.ResultsFlag()
	managerArgs = benchkit.ManagerArgsFlag("--signer-concurrency=32")
	flag.IntVar(&agentsInFlight, "agents-in-flight", agentsInFlight, "how many agents create their CSRs at the same time in the renewal wave and in its raw pace")
	flag.BoolVar(&coresSplit, "split-cores", false, "run the API server and etcd on the first core, the benchmark and the manager on the others (Linux): the pace when the manager does not take the API server's CPU (the manager then has one core less)")
	flag.BoolVar(&asAdmin, "admin", false, "run the manager with the binary's defaults, it and the raw writers as system:masters (the manager as in the rows measured before the benchmark used the chart's identity and RBAC; the raw writers were system:masters until 2 December 2026)")
	flag.BoolVar(&consistencyChecks, "consistency-checks", false, "leave the API server's periodic watch cache consistency check on (DetectCacheInconsistency, on by default in Kubernetes since 1.34), whose full reads from etcd land in some phases and not in others")
	flag.StringVar(&profileDir, "profiles", "", "write CPU profiles of the API server and the manager, and the manager's allocations, taken during the first seconds of each phase, to this directory; the API server's are summed by kind of work in the accounting")
	flag.IntVar(&profileSeconds, "profile-seconds", profileSeconds, "how many seconds of each phase the --profiles cover")
	flag.StringVar(&managerLog, "manager-log", "", "keep the manager's log of the last run in this file (by default it is read for errors and removed)")
	flag.StringVar(&managerLogLevel, "manager-log-level", managerLogLevel, "the manager's --zap-log-level; debug logs how long each step of every GitOpsCluster pass took")
	flag.StringVar(&memoryLimit, "memory-limit", "", "run the manager as in a container with this memory limit (e.g. 160Mi): GOMEMLIMIT as the binary sets it from its cgroup")
	flag.Parse()
	// envtest logs through controller-runtime; the benchmark reports its errors itself, and an
	// unset logger prints a stack trace into the results once a later run starts an API server.
	ctrllog.SetLogger(logr.Discard())
	if profileSeconds <= 0 || *runs < 1 {
		fail(fmt.Errorf("--profile-seconds and --runs must be positive, got %d and %d", profileSeconds, *runs))
	}
	out := benchkit.NewOutput()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fail(err)
		}
		var table benchkit.Table
		for i := 1; i <= *runs; i++ {
			r, err := run(n, *idle, *binary, fmt.Sprintf("%d-run%d-", n, i))
			if err != nil {
				fail(fmt.Errorf("fleet of %d clusters, run %d: %w", n, i, err))
			}
			printRun(out, n, i, r)
			printAccounting(out, n, r)
			r.figures(&table, n)
		}
		out.Printf("%d clusters, %d run(s), median and spread (targets in brackets):\n", n, *runs)
		table.Print(out)
	}
	if err := out.Append(*results, "fleet"); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleet benchmark:", err)
	os.Exit(1)
}

// managerArgs are extra flags for the manager under test.
var managerArgs *benchkit.Strings

// agentsInFlight is how many agents create their CSRs at the same time.
var agentsInFlight = 16

// coresSplit runs the API server and etcd apart from the manager (splitCores).
var coresSplit bool

// consistencyChecks leaves the API server's watch cache consistency check on.
var consistencyChecks bool

// asAdmin runs the manager and the raw writers as system:masters instead of ServiceAccounts
// with only their own rights.
var asAdmin bool

// memoryLimit is the container memory limit the manager runs as if under ("" for none).
var memoryLimit string

// managerLog keeps the manager's log there ("" removes it); managerLogLevel is its level.
var (
	managerLog      string
	managerLogLevel = "error"
)
