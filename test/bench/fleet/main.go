// Command fleet benchmarks the GitOpsCluster reconciler on a real API server: for each fleet
// size it creates N ManagedClusters with PlacementDecisions (and ManagedClusterAddOns reporting
// Available, standing in for OCM's addon-manager), starts the manager binary as a process,
// applies a GitOpsCluster and prints time to Ready, API writes per cluster as counted by the
// API server's own metrics (the components' probes counted apart), writes during an idle
// period, and the manager's peak memory.
//
// The hub is made realistic: every cluster namespace also holds other addons'
// ManagedClusterAddOns and a few unrelated Secrets and ConfigMaps, so the cache's memory is
// honest. The API server's raw write rate (a plain client, no rate limit, 16 writers, N
// Secrets of the shape and size of the manager's cluster secrets) is measured in the same run
// and the time to Ready printed against it, beside the rate for N Secrets of 2 KiB of zeros
// that earlier rows were measured against; the same raw writes are measured again once the
// fleet is deleted, to show how far the machine's pace moved. The manager runs as the chart installs it: its
// ServiceAccount, with the chart's RBAC and arguments (--admin: system:masters).
package main

import (
	"bufio"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/clustersecrets"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
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
	flag.Var(&managerArgs, "manager-arg", "an extra manager flag, e.g. --manager-arg=--signer-concurrency=32 (repeatable)")
	flag.IntVar(&agentsInFlight, "agents-in-flight", agentsInFlight, "how many agents create their CSRs at the same time in the renewal wave and in its raw pace")
	flag.BoolVar(&coresSplit, "split-cores", false, "run the API server and etcd on the first core, the benchmark and the manager on the others (Linux): the pace when the manager does not take the API server's CPU (the manager then has one core less)")
	flag.BoolVar(&asAdmin, "admin", false, "run the manager as system:masters with the binary's defaults (as in the rows measured before the benchmark used the chart's identity and RBAC)")
	flag.BoolVar(&consistencyChecks, "consistency-checks", false, "leave the API server's periodic watch cache consistency check on (DetectCacheInconsistency, on by default in Kubernetes since 1.34), whose full reads from etcd land in some phases and not in others")
	flag.StringVar(&profileDir, "profiles", "", "write CPU profiles of the API server and the manager, and the manager's allocations, taken during the first seconds of each phase, to this directory")
	flag.IntVar(&profileSeconds, "profile-seconds", profileSeconds, "how many seconds of each phase the --profiles cover")
	flag.StringVar(&managerLog, "manager-log", "", "keep the manager's log of the last fleet size in this file (by default it is read for errors and removed)")
	flag.StringVar(&managerLogLevel, "manager-log-level", managerLogLevel, "the manager's --zap-log-level; debug logs how long each step of every GitOpsCluster pass took")
	flag.StringVar(&memoryLimit, "memory-limit", "", "run the manager as in a container with this memory limit (e.g. 160Mi): GOMEMLIMIT as the binary sets it from its cgroup")
	flag.Parse()
	if profileSeconds <= 0 {
		fail(fmt.Errorf("--profile-seconds must be positive, got %d", profileSeconds))
	}

	fmt.Printf("%-8s %-14s %-12s %-8s %-12s %-10s %-18s %-16s %-14s\n", "clusters", "time-to-ready", "raw-writes", "ratio", "raw-2KiB", "ratio-2KiB", "writes/cluster", "idle-writes", "peak-RSS")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fail(err)
		}
		r, err := run(n, *idle, *binary)
		if err != nil {
			fail(fmt.Errorf("fleet of %d clusters: %w", n, err))
		}
		fmt.Printf("%-8d %-14s %-12s %-8.2f %-12s %-10.2f %-18.3f %-16s %-14s\n", n, r.ready.Round(10*time.Millisecond), r.rawCPU.took.Round(10*time.Millisecond),
			r.ready.Seconds()/r.rawCPU.took.Seconds(), r.rawZerosCPU.took.Round(10*time.Millisecond), r.ready.Seconds()/r.rawZerosCPU.took.Seconds(), r.writesPerCluster,
			fmt.Sprintf("%d in %s", r.idleWrites, *idle), fmt.Sprintf("%.1f MiB", float64(r.peakKiB)/1024))
		fmt.Printf("         memory: peak RSS %.1f MiB; largest anonymous part %.1f MiB (the rest is the binary's file-backed pages)\n",
			float64(r.peakKiB)/1024, float64(r.peakAnonKiB)/1024)
		fmt.Printf("         after Ready: writes stopped %s later, %d writes in between %v (idle writes are counted after that)\n",
			r.settle.Round(10*time.Millisecond), testenv.TotalWrites(r.settleWrites), r.settleWrites)
		fmt.Printf("         raw writes: %d Secrets of the manager's cluster secrets' shape (labels, annotation, finalizer, certificate, key and CA) in %s (API server and etcd CPU %s); %d Secrets of 2 KiB of zeros, the raw writes of the earlier rows, in %s (%s)\n",
			n, r.rawCPU.took.Round(10*time.Millisecond), r.rawCPU.servers.Round(10*time.Millisecond), n, r.rawZerosCPU.took.Round(10*time.Millisecond), r.rawZerosCPU.servers.Round(10*time.Millisecond))
		fmt.Printf("         the same raw writes after the fleet's deletion: %s (API server and etcd CPU %s, etcd %s, %s): time to Ready is %.2f of them, %.2f of the mean of both raw runs\n",
			r.rawAfterCPU.took.Round(10*time.Millisecond), r.rawAfterCPU.servers.Round(10*time.Millisecond), r.rawAfterCPU.etcd.Round(10*time.Millisecond), r.rawAfterCPU.compactionsSaid(),
			r.ready.Seconds()/r.rawAfterCPU.took.Seconds(), 2*r.ready.Seconds()/(r.rawCPU.took+r.rawAfterCPU.took).Seconds())
		fmt.Printf("         manager ready (its controllers' informers synced) %s after its start; the clock started then\n", r.synced.Round(10*time.Millisecond))
		fmt.Printf("         manager CPU until Ready: %s in %s (%.0f%% of one core; the API server and etcd share the same cores)\n",
			r.readyCPU.Round(10*time.Millisecond), r.ready.Round(10*time.Millisecond), 100*r.readyCPU.Seconds()/r.ready.Seconds())
		cores := runtime.NumCPU()
		fmt.Printf("         CPU (%d cores): raw writes: API server and etcd %s, the writers %s in %s (%.2f cores busy; all busy would take %s); registration: API server and etcd %s, the manager and this benchmark's polling %s in %s (%.2f cores busy; all busy would take %s, %.2f of the raw time)\n",
			cores, r.rawCPU.servers.Round(10*time.Millisecond), r.rawCPU.client.Round(10*time.Millisecond), r.rawCPU.took.Round(10*time.Millisecond), r.rawCPU.busy(), r.rawCPU.floor(cores).Round(10*time.Millisecond),
			r.registrationCPU.servers.Round(10*time.Millisecond), r.registrationCPU.client.Round(10*time.Millisecond), r.ready.Round(10*time.Millisecond), r.registrationCPU.busy(),
			r.registrationCPU.floor(cores).Round(10*time.Millisecond), r.registrationCPU.floor(cores).Seconds()/r.rawCPU.took.Seconds())
		fmt.Printf("         of which etcd: raw writes %s (%s), registration %s (%s); raw CSR pace %s (%s), with ledger records %s (%s), wave %s (%s)\n",
			r.rawCPU.etcd.Round(10*time.Millisecond), r.rawCPU.compactionsSaid(), r.registrationCPU.etcd.Round(10*time.Millisecond), r.registrationCPU.compactionsSaid(),
			r.rawWaveCPU.etcd.Round(10*time.Millisecond), r.rawWaveCPU.compactionsSaid(), r.rawRecordedCPU.etcd.Round(10*time.Millisecond), r.rawRecordedCPU.compactionsSaid(),
			r.waveCPU.etcd.Round(10*time.Millisecond), r.waveCPU.compactionsSaid())
		fmt.Printf("         until Ready: watch events the API server sent %v\n", r.watchEvents)
		fmt.Printf("         until Ready: reads (GET and LIST) %v\n", r.readyReads)
		fmt.Printf("         writes by resource while converging: %v (writes/cluster counts all but the %s)\n", r.byResource, probeResource)
		fmt.Printf("         the components' probes: %.3f per cluster, from the GitOpsCluster's creation until the writes stopped\n", r.probesPerCluster)
		perCSR := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", d.Seconds()*1000/float64(n)) }
		fmt.Printf("         one cluster joining: its cluster secret after %s, %d API writes %v\n", r.join.Round(time.Millisecond), testenv.TotalWrites(r.joinCalls), r.joinCalls)
		fmt.Printf("         renewal wave: %d agent CSRs signed in %s (%.0f/s end to end; the last created after %s, %d agents at a time); the API server's raw pace for the same CSRs: %.0f/s (wave %.2f of it)\n",
			n, r.wave.Round(10*time.Millisecond), float64(n)/r.wave.Seconds(), r.waveCreated.Round(10*time.Millisecond), agentsInFlight, float64(n)/r.rawWaveCPU.took.Seconds(),
			r.rawWaveCPU.took.Seconds()/r.wave.Seconds())
		fmt.Printf("         the raw pace with a ledger record before each certificate, as the signer writes (4 writes per CSR, not 3): %.0f/s (wave %.2f of it); API server and etcd %s per CSR, the client with the agents %s (%.2f cores busy)\n",
			float64(n)/r.rawRecordedCPU.took.Seconds(), r.rawRecordedCPU.took.Seconds()/r.wave.Seconds(),
			perCSR(r.rawRecordedCPU.servers), perCSR(r.rawRecordedCPU.client), r.rawRecordedCPU.busy())
		fmt.Printf("         the same raw paces once the wave's writes stopped, the fleet in place (the manager's CPU meanwhile %s): 3 writes %.0f/s (wave %.2f of it, %.2f of the mean of both 3-write runs), 4 writes %.0f/s (wave %.2f of it, %.2f of the mean of both 4-write runs); API server and etcd %s and %s per CSR; etcd %s (%s) and %s (%s)\n",
			r.rawAfterManagerCPU.Round(10*time.Millisecond),
			float64(n)/r.rawWaveAfterCPU.took.Seconds(), r.rawWaveAfterCPU.took.Seconds()/r.wave.Seconds(), (r.rawWaveCPU.took+r.rawWaveAfterCPU.took).Seconds()/2/r.wave.Seconds(),
			float64(n)/r.rawRecordedAfterCPU.took.Seconds(), r.rawRecordedAfterCPU.took.Seconds()/r.wave.Seconds(), (r.rawRecordedCPU.took+r.rawRecordedAfterCPU.took).Seconds()/2/r.wave.Seconds(),
			perCSR(r.rawWaveAfterCPU.servers), perCSR(r.rawRecordedAfterCPU.servers),
			r.rawWaveAfterCPU.etcd.Round(10*time.Millisecond), r.rawWaveAfterCPU.compactionsSaid(), r.rawRecordedAfterCPU.etcd.Round(10*time.Millisecond), r.rawRecordedAfterCPU.compactionsSaid())
		fmt.Printf("         reads during the wave: %.2f per CSR %v\n", float64(testenv.TotalWrites(r.waveReads))/float64(n), r.waveReads)
		fmt.Printf("         writes during the wave: %.2f per CSR %v\n", float64(testenv.TotalWrites(r.waveWrites))/float64(n), r.waveWrites)
		fmt.Printf("         CPU per CSR: raw pace: API server and etcd %s, the approving and signing client with the agents %s (%.2f cores busy); wave: API server and etcd %s, the manager %s, the agents %s (%.2f cores busy)\n",
			perCSR(r.rawWaveCPU.servers), perCSR(r.rawWaveCPU.client), r.rawWaveCPU.busy(),
			perCSR(r.waveCPU.servers), perCSR(r.waveCPU.client), perCSR(r.waveAgentsCPU), (r.waveCPU.servers+r.waveCPU.client+r.waveAgentsCPU).Seconds()/r.wave.Seconds())
		d := r.deletion
		fmt.Printf("         GitOpsCluster deletion: done in %s, the last cluster secret gone after %s; %d cluster secret(s) and %d ledger(s) left; %d certificates revoked; blocklist %d keys, %d of %d budget bytes, %d bytes stored (etcd's limit %d)\n",
			d.took.Round(10*time.Millisecond), d.secretsGone.Round(10*time.Millisecond), d.secretsLeft, d.ledgersLeft, d.revokedCerts, d.blocklistKeys, d.blocklistBytes, ledger.BlocklistBudget, d.blocklistStoredBytes, 1536*1024)
	}
}

// managerArgs are extra flags for the manager under test.
var managerArgs stringList

// agentsInFlight is how many agents create their CSRs at the same time.
var agentsInFlight = 16

// coresSplit runs the API server and etcd apart from the manager (splitCores).
var coresSplit bool

// consistencyChecks leaves the API server's watch cache consistency check on.
var consistencyChecks bool

// asAdmin runs the manager as system:masters instead of the chart's ServiceAccount.
var asAdmin bool

// memoryLimit is the container memory limit the manager runs as if under ("" for none).
var memoryLimit string

// managerLog keeps the manager's log there ("" removes it); managerLogLevel is its level.
var (
	managerLog      string
	managerLogLevel = "error"
)

// reportManagerErrors prints how many errors the manager logged (lines below error level, from
// a lower --manager-log-level, are skipped) and the first of them, so a slow phase can be told
// from a failing one.
func reportManagerErrors(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if managerLog != "" {
		if err := os.WriteFile(managerLog, b, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "keep the manager's log: %v\n", err)
		}
	}
	// Distinct errors, by controller and message: a conflict retried is not a failure, but it
	// shows as one here, and a reader must see which it was.
	seen := map[string]int{}
	var order []string
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ Level, Controller, Msg, Error string }
		if l == "" {
			continue
		}
		if json.Unmarshal([]byte(l), &e) != nil {
			e.Msg = l
		} else if e.Level == "info" || e.Level == "debug" || e.Level == "warn" || strings.HasPrefix(e.Level, "Level(") {
			continue // a lower --manager-log-level's lines
		}
		lines = append(lines, l)
		k := strings.TrimSpace(e.Controller + " " + e.Msg + ": " + e.Error)
		if len(k) > 240 {
			k = k[:240]
		}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
	}
	fmt.Printf("         manager errors: %d log lines\n", len(lines))
	for _, k := range order[:min(len(order), 3)] {
		fmt.Printf("           %dx %s\n", seen[k], k)
	}
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type result struct {
	ready       time.Duration
	rawZerosCPU cpuShare // Secrets of 2 KiB of zeros, the raw writes of the earlier rows
	rawAfterCPU cpuShare // the raw writes again, after the fleet's deletion
	join        time.Duration
	joinCalls   map[string]int
	wave        time.Duration
	waveCreated time.Duration  // until the agents' last CSR was created
	waveReads   map[string]int // GET and LIST requests during the wave, the benchmark's own included
	waveWrites  map[string]int // write requests during the wave, the agents' CSRs and the benchmark's own included
	readyReads  map[string]int // the same from the GitOpsCluster's creation to Ready (the benchmark's polling included)
	synced      time.Duration  // from the manager's start until it reported ready
	// writesPerCluster counts the registration's writes until 2 s after Ready, except the
	// components' probes: one ManifestWork per cluster that the manager's pass creates after
	// its status write, a few hundred per second, so how many fall before the count is a
	// matter of when it is taken. probesPerCluster counts every ManifestWork write from the
	// GitOpsCluster's creation until the writes stop.
	writesPerCluster, probesPerCluster float64
	idleWrites                         int
	peakKiB                            int
	peakAnonKiB                        int
	// readyCPU is the CPU time the manager used from the GitOpsCluster's creation to Ready:
	// on a machine where the API server, etcd and the manager share the cores, it is what the
	// API server did not get.
	readyCPU time.Duration
	// rawCPU and registrationCPU are the CPU time of the API server, etcd and each side's client
	// while the raw writers wrote Secrets of the manager's cluster secrets' shape, and from the
	// GitOpsCluster's creation to Ready.
	rawCPU, registrationCPU cpuShare
	// rawWaveCPU and waveCPU are the same for the raw CSR pace and the renewal wave; the
	// wave's client is the manager, and waveAgentsCPU is this process (the agents' requests).
	rawWaveCPU, waveCPU cpuShare
	waveAgentsCPU       time.Duration
	// rawRecordedCPU is the raw CSR pace with a ledger record before each certificate: the
	// least a signer that records what it issues can write, so the best pace the wave can
	// reach (the machine's drift between the phases aside).
	rawRecordedCPU cpuShare
	// rawWaveAfterCPU and rawRecordedAfterCPU are the two raw CSR paces again once the wave's
	// writes stopped, on the API server the wave ran on (the fleet's objects, the manager's
	// watches), so that the wave is also judged against a raw pace on the same server; how far
	// the two runs of a pace differ is the machine's drift within the run.
	// rawAfterManagerCPU is what the manager used meanwhile.
	rawWaveAfterCPU, rawRecordedAfterCPU cpuShare
	rawAfterManagerCPU                   time.Duration
	// watchEvents are the watch events the API server sent (to every watcher) from the
	// GitOpsCluster's creation to Ready, per resource.
	watchEvents map[string]int
	byResource  map[string]int
	// settle is how long after Ready the manager's writes stopped, settleWrites what it wrote
	// in that time (a new fleet's probes).
	settle       time.Duration
	settleWrites map[string]int
	deletion     deletion
}

// cpuShare is the CPU time the processes that share the machine's cores used in one phase.
type cpuShare struct {
	servers time.Duration // the API server and etcd
	client  time.Duration // the raw writers (this process), or the manager
	took    time.Duration
	// etcd is etcd's part of servers, and compactions how many compactions etcd finished in
	// the phase (one that ends after it is not counted): the API server asks for one every 5
	// minutes, whichever phase runs then.
	etcd        time.Duration
	compactions int
}

// hubUsage is what the API server and etcd have used so far.
type hubUsage struct {
	apiServer, etcd time.Duration
	compactions     int
}

func hubUsageNow(env *testenv.Env) hubUsage {
	var u hubUsage
	apiServers, _ := childrenNamed("kube-apiserver")
	for _, pid := range apiServers {
		u.apiServer += processCPU(pid)
	}
	etcds, _ := childrenNamed("etcd")
	for _, pid := range etcds {
		u.etcd += processCPU(pid)
	}
	u.compactions = etcdCompactions(env)
	return u
}

// since is the servers' part of a phase that started at u.
func (u hubUsage) since(env *testenv.Env) (servers, etcd time.Duration, compactions int) {
	now := hubUsageNow(env)
	compactions = now.compactions - u.compactions
	if now.compactions < 0 || u.compactions < 0 {
		compactions = -1
	}
	return now.apiServer + now.etcd - u.apiServer - u.etcd, now.etcd - u.etcd, compactions
}

// etcdCompactions reads how many compactions etcd has finished from its metrics (-1 when they
// cannot be read).
func etcdCompactions(env *testenv.Env) int {
	cp := env.Environment.ControlPlane
	if cp.Etcd == nil || cp.Etcd.URL == nil {
		return -1
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(cp.Etcd.URL.String() + "/metrics")
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const metric = "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count "
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), metric); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return int(n)
		}
	}
	return -1
}

// measure runs a phase of this process's own clients (the raw writers, the raw pace's agents
// and signer) once the profiles of the phase before have ended, so that the wait is not
// counted, and returns how long it took and what it cost the API server, etcd and this process.
func measure(prof *profiler, env *testenv.Env, name string, phase func() (time.Duration, error)) (cpuShare, error) {
	prof.phase(name)
	hubBefore, selfBefore := hubUsageNow(env), processCPU(os.Getpid())
	took, err := phase()
	if err != nil {
		return cpuShare{}, err
	}
	share := cpuShare{client: processCPU(os.Getpid()) - selfBefore, took: took}
	share.servers, share.etcd, share.compactions = hubBefore.since(env)
	return share, nil
}

// compactionsSaid says how many compactions etcd finished in the phase.
func (c cpuShare) compactionsSaid() string {
	if c.compactions < 0 {
		return "compactions unknown"
	}
	return fmt.Sprintf("%d compaction(s)", c.compactions)
}

// busy is how many cores the phase kept busy on average.
func (c cpuShare) busy() float64 { return (c.servers + c.client).Seconds() / c.took.Seconds() }

// floor is how long the phase's CPU would take with every core busy all the time: no phase
// that needs this CPU can be faster on this machine.
func (c cpuShare) floor(cores int) time.Duration {
	return (c.servers + c.client) / time.Duration(cores)
}

// deletion is what deleting the fleet's GitOpsCluster left behind.
type deletion struct {
	took time.Duration
	// secretsGone is when the last cluster secret went: a secret carries the certificate
	// recorder's finalizer, so it goes after its GitOpsCluster (0 if some never went).
	secretsGone                        time.Duration
	secretsLeft, ledgersLeft           int
	blocklistKeys, blocklistBytes      int
	blocklistStoredBytes, revokedCerts int
}

// deleteFleet deletes the GitOpsCluster and waits for its finalizer: every agent must be
// unregistered (no cluster secret left) and its certificates blocked.
func deleteFleet(ctx context.Context, env *testenv.Env) (deletion, error) {
	var d deletion
	c := env.Client
	start := time.Now()
	if err := c.Delete(ctx, &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName}}); err != nil {
		return d, err
	}
	for deadline := start.Add(20 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, &v1alpha1.GitOpsCluster{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return d, err
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("the GitOpsCluster is still there 20 minutes after its deletion")
		}
	}
	d.took = time.Since(start)
	// The cluster secrets being deleted wait for the certificate recorder; wait while their
	// number falls.
	last, lastChange := -1, time.Now()
	for {
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(namespace), client.HasLabels{v1alpha1.LabelAgentName}); err != nil {
			return d, err
		}
		d.secretsLeft = len(secrets.Items)
		if d.secretsLeft == 0 {
			d.secretsGone = time.Since(start)
			break
		}
		if d.secretsLeft != last {
			last, lastChange = d.secretsLeft, time.Now()
		} else if time.Since(lastChange) > 30*time.Second {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	var ledgers corev1.ConfigMapList
	if err := c.List(ctx, &ledgers, client.InNamespace(namespace), client.MatchingLabels{ledger.LabelRecord: ledger.RecordLedger}); err != nil {
		return d, err
	}
	d.ledgersLeft = len(ledgers.Items)
	store := ledger.Store{Client: c, Reader: c, Namespace: namespace}
	bl := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ledger.BlocklistName}, bl); err != nil {
		return d, err
	}
	raw, err := bl.Marshal()
	if err != nil {
		return d, err
	}
	d.blocklistKeys, d.blocklistBytes, d.blocklistStoredBytes = len(bl.Data), ledger.BlocklistBytes(bl.Data), len(raw)
	revoked, err := store.Revoked(ctx, time.Now())
	if err != nil {
		return d, err
	}
	d.revokedCerts = len(revoked)
	return d, nil
}

// joinOne adds one cluster to the fleet's last decision page and times its cluster secret.
func joinOne(ctx context.Context, env *testenv.Env, n int) (time.Duration, map[string]int, error) {
	c := env.Client
	name := fmt.Sprintf("cluster-%05d", n)
	if err := fakehub.CreateClusters(ctx, c, []string{name}, fakehub.Options{Addon: addonName}); err != nil {
		return 0, nil, err
	}
	before, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return 0, nil, err
	}
	changes, err := watchStatusChanges(ctx, env)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	if err := fakehub.SetDecisions(ctx, c, namespace, "all", append(fakehub.Names("cluster-", n), name)); err != nil {
		return 0, nil, err
	}
	for {
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: "cluster-" + name}, &corev1.Secret{}); err == nil {
			break
		}
		if time.Since(start) > time.Minute {
			return 0, nil, fmt.Errorf("no cluster secret for a joining cluster after a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	after, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return 0, nil, err
	}
	diff := testenv.DiffWrites(before, after)
	delete(diff, "placementdecisions/status") // the benchmark's own page write
	delete(diff, "placementdecisions")
	for i, fields := range changes() {
		fmt.Fprintf(os.Stderr, "N=%d: join: status write %d changed %s\n", n, i+1, strings.Join(fields, ", "))
	}
	return took, diff, nil
}

// watchStatusChanges watches the benchmark's GitOpsCluster and, when its result is called,
// stops and returns for each status write seen what it changed (top-level status fields, and
// conditions by type), so that a join's writes say what each one carried.
func watchStatusChanges(ctx context.Context, env *testenv.Env) (func() [][]string, error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return nil, err
	}
	g := &v1alpha1.GitOpsCluster{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, g); err != nil {
		return nil, err
	}
	w, err := wc.Watch(ctx, &v1alpha1.GitOpsClusterList{}, client.InNamespace(namespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: g.ResourceVersion}})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var out [][]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		prev := g.Status
		for ev := range w.ResultChan() {
			cur, ok := ev.Object.(*v1alpha1.GitOpsCluster)
			if !ok {
				continue
			}
			mu.Lock()
			out = append(out, statusDiff(prev, cur.Status))
			mu.Unlock()
			prev = cur.Status
		}
	}()
	return func() [][]string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}, nil
}

func statusDiff(a, b v1alpha1.GitOpsClusterStatus) []string {
	var out []string
	am, bm := asMap(a), asMap(b)
	delete(am, "conditions")
	delete(bm, "conditions")
	for k := range bm {
		if fmt.Sprint(am[k]) != fmt.Sprint(bm[k]) {
			out = append(out, fmt.Sprintf("%s %v -> %v", k, am[k], bm[k]))
		}
	}
	for k := range am {
		if _, ok := bm[k]; !ok {
			out = append(out, k+" removed")
		}
	}
	for _, c := range b.Conditions {
		if o := meta.FindStatusCondition(a.Conditions, c.Type); o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			out = append(out, fmt.Sprintf("condition %s: %q", c.Type, c.Message))
		}
	}
	if len(out) == 0 {
		out = append(out, "nothing in status (metadata only)")
	}
	return out
}

func asMap(v any) map[string]any {
	raw, _ := json.Marshal(v)
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

// agentClients lets the benchmark ask for certificates as each cluster's registration agent:
// it grants those identities what OCM's hub grants them for CSRs and returns a client maker
// that impersonates one cluster's agent over a connection pool shared by all (a TLS handshake
// per cluster would measure the benchmark's own client).
func agentClients(ctx context.Context, env *testenv.Env) (func(cluster string) (kubernetes.Interface, error), error) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-csr-requester"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-csr-requester"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:open-cluster-management:managed-clusters"}}}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	base, err := rest.TransportFor(env.Config)
	if err != nil {
		return nil, err
	}
	return func(cluster string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, QPS: -1, Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
			UserName: signer.RequesterPrefix(cluster) + "agent",
			Groups:   []string{signer.ClusterGroup(cluster), "system:open-cluster-management:managed-clusters", "system:authenticated"},
		}, base)})
	}, nil
}

// rawSigner is the signer the raw pace's CSRs name: the manager does not serve it.
const rawSigner = "bench.argocd-agent-addon.io/raw"

// rawCSRs is the API server's own pace for the wave's work: each cluster's agent creates a CSR,
// and a plain client with no rate limit and no checks approves it and publishes a certificate
// (3 writes, the least any signer can do), 16 CSRs at a time. With ledgers (rawLedgers), the
// client also records each certificate in its cluster's ledger-shaped ConfigMap before it
// publishes it, as the manager's signer must so that every certificate that exists can be
// revoked (4 writes: the least a signer that records can do). The CSRs name a signer the
// manager does not serve; deleteRawCSRs deletes them.
func rawCSRs(ctx context.Context, env *testenv.Env, clusters []string, ledgers map[string]*corev1.ConfigMap) (time.Duration, error) {
	newAgent, err := agentClients(ctx, env)
	if err != nil {
		return 0, err
	}
	admin, err := kubernetes.NewForConfig(unthrottled(env))
	if err != nil {
		return 0, err
	}
	ca, err := pki.NewCA("bench raw signer", time.Hour, time.Now())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = fakehub.ParallelN(agentsInFlight, clusters, func(cluster string) error {
		cs, err := newAgent(cluster)
		if err != nil {
			return err
		}
		csr, err := testenv.AgentCSR(cluster, cluster, addonName, rawSigner)
		if err != nil {
			return err
		}
		if csr, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{}); err != nil {
			return err
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Bench"})
		if csr, err = admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			return err
		}
		block, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return err
		}
		certPEM, cert, err := ca.SignClientCertificate(req.PublicKey, req.Subject, req.DNSNames, time.Hour, time.Now())
		if err != nil {
			return err
		}
		if cm := ledgers[cluster]; cm != nil {
			cm.Data[pki.Fingerprint(cert)] = cert.NotAfter.UTC().Format(time.RFC3339)
			if _, err := admin.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		csr.Status.Certificate = certPEM
		_, err = admin.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{})
		return err
	})
	return time.Since(start), err
}

// rawCSRPace measures rawCSRs, with a ledger record before each certificate when recorded,
// and deletes what the phase made, so that the phases after it do not pay for it. suffix ends
// the phase's name in the profiles ("" before the manager starts).
func rawCSRPace(ctx context.Context, prof *profiler, env *testenv.Env, clusters []string, recorded bool, suffix string) (cpuShare, error) {
	name, ledgers := "raw-csrs", map[string]*corev1.ConfigMap(nil)
	if recorded {
		var err error
		if ledgers, err = rawLedgers(ctx, env, clusters); err != nil {
			return cpuShare{}, err
		}
		name = "raw-recorded-csrs"
	}
	name += suffix
	share, err := measure(prof, env, name, func() (time.Duration, error) { return rawCSRs(ctx, env, clusters, ledgers) })
	if err != nil {
		return cpuShare{}, err
	}
	if err := deleteRawCSRs(ctx, env); err != nil {
		return cpuShare{}, err
	}
	if recorded {
		return share, deleteRawLedgers(ctx, env)
	}
	return share, nil
}

// rawCSRPaces measures the raw CSR pace with 3 writes per request, then with 4 (a ledger
// record before each certificate).
func rawCSRPaces(ctx context.Context, prof *profiler, env *testenv.Env, clusters []string, suffix string) (three, four cpuShare, err error) {
	if three, err = rawCSRPace(ctx, prof, env, clusters, false, suffix); err != nil {
		return cpuShare{}, cpuShare{}, fmt.Errorf("raw CSR pace: %w", err)
	}
	if four, err = rawCSRPace(ctx, prof, env, clusters, true, suffix); err != nil {
		return cpuShare{}, cpuShare{}, fmt.Errorf("raw CSR pace with ledger records: %w", err)
	}
	return three, four, nil
}

// rawLedgersNamespace holds rawLedgers' ConfigMaps.
const rawLedgersNamespace = "raw-ledgers"

// rawLedgers creates, for each cluster, a ConfigMap of the shape of the signer's ledger after a
// registration (the ledger's own labels and one certificate's entry), which a renewal
// updates. Their managed-by label is not the manager's, so its cache (ledger.Selector) never
// holds them; deleteRawLedgers deletes them after each measurement and leaves the namespace
// for the next.
func rawLedgers(ctx context.Context, env *testenv.Env, clusters []string) (map[string]*corev1.ConfigMap, error) {
	admin, err := kubernetes.NewForConfig(unthrottled(env))
	if err != nil {
		return nil, err
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawLedgersNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	notAfter := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	var mu sync.Mutex
	out := make(map[string]*corev1.ConfigMap, len(clusters))
	err = fakehub.Parallel(clusters, func(cluster string) error {
		labels := ledger.Labels(cluster, ledger.Owner{Namespace: namespace, Name: gitOpsClusterName})
		labels[v1alpha1.LabelManagedBy] = "bench-raw-ledger"
		cm, err := admin.CoreV1().ConfigMaps(rawLedgersNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ledger.LedgerName(cluster), Labels: labels},
			Data:       map[string]string{strings.Repeat("0", 64): notAfter},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		mu.Lock()
		out[cluster] = cm
		mu.Unlock()
		return nil
	})
	return out, err
}

// deleteRawLedgers deletes rawLedgers' ConfigMaps.
func deleteRawLedgers(ctx context.Context, env *testenv.Env) error {
	admin, err := kubernetes.NewForConfig(unthrottled(env))
	if err != nil {
		return err
	}
	return admin.CoreV1().ConfigMaps(rawLedgersNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// deleteRawSecrets deletes the raw writes' Secrets (and their finalizers).
func deleteRawSecrets(ctx context.Context, env *testenv.Env, namespaces ...string) error {
	admin, err := kubernetes.NewForConfig(unthrottled(env))
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		secrets := admin.CoreV1().Secrets(ns)
		if err := secrets.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		left, err := secrets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		finalized := []byte(`{"metadata":{"finalizers":null}}`)
		if err := fakehub.Parallel(left.Items, func(s corev1.Secret) error {
			_, err := secrets.Patch(ctx, s.Name, types.MergePatchType, finalized, metav1.PatchOptions{})
			return client.IgnoreNotFound(err)
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteRawCSRs deletes the CSRs rawCSRs made.
func deleteRawCSRs(ctx context.Context, env *testenv.Env) error {
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	return admin.CertificatesV1().CertificateSigningRequests().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "spec.signerName=" + rawSigner})
}

// renewalWave makes every cluster's registration agent ask for a new certificate at once, as
// each cluster's own identity, and times until all are signed.
func renewalWave(ctx context.Context, env *testenv.Env, clusters []string) (took, createdIn time.Duration, err error) {
	newAgent, err := agentClients(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	// Watch rather than poll: listing thousands of CSRs with their certificates every few
	// hundred milliseconds would load the API server more than the signer does.
	admin, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return 0, 0, err
	}
	// From now on only: CSRs of earlier phases do not count.
	now, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, 0, err
	}
	timeout := int64((30 * time.Minute).Seconds())
	w, err := admin.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout, ResourceVersion: now.ResourceVersion})
	if err != nil {
		return 0, 0, err
	}
	defer func() { w.Stop() }()
	start := time.Now()
	created := make(chan error, 1)
	go func() {
		created <- fakehub.ParallelN(agentsInFlight, clusters, func(cluster string) error {
			cs, err := newAgent(cluster)
			if err != nil {
				return err
			}
			csr, err := testenv.AgentCSR(cluster, cluster, addonName, "open-cluster-management.io/"+addonName)
			if err != nil {
				return err
			}
			_, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
			return err
		})
	}()
	signed := map[string]bool{}
	deadline := time.After(20 * time.Minute)
	for len(signed) < len(clusters) {
		select {
		case err := <-created:
			if err != nil {
				return 0, 0, err
			}
			createdIn = time.Since(start)
			created = nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				// The API server drops a watcher that falls behind; catch up with one list
				// and watch again from there.
				list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
				if err != nil {
					return 0, 0, err
				}
				for i := range list.Items {
					if len(list.Items[i].Status.Certificate) > 0 {
						signed[list.Items[i].Name] = true
					}
				}
				if w, err = admin.CertificatesV1().CertificateSigningRequests().Watch(ctx,
					metav1.ListOptions{TimeoutSeconds: &timeout, ResourceVersion: list.ResourceVersion}); err != nil {
					return 0, 0, err
				}
				continue
			}
			csr, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !isCSR {
				continue
			}
			for _, cond := range csr.Status.Conditions {
				if cond.Type == certificatesv1.CertificateFailed {
					return 0, 0, fmt.Errorf("CSR %s of the wave was refused: %s", csr.Name, cond.Message)
				}
			}
			if len(csr.Status.Certificate) > 0 {
				signed[csr.Name] = true
			}
		case <-deadline:
			return 0, 0, fmt.Errorf("%d of %d CSRs signed after 20 minutes", len(signed), len(clusters))
		}
	}
	return time.Since(start), createdIn, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleet benchmark:", err)
	os.Exit(1)
}

func run(n int, idle time.Duration, binary string) (*result, error) {
	ctx := context.Background()
	var apiServerArgs map[string]string
	if !consistencyChecks {
		// Every 5 minutes (with jitter) the API server's watch cache reads each resource in
		// full from etcd to compare it with its own copy: at 10,000 clusters each such read of
		// the 90,000 addons or the Secrets costs seconds of CPU, and whether it falls into the
		// raw phase or the manager's decides the ratio more than either does.
		apiServerArgs = map[string]string{"feature-gates": "DetectCacheInconsistency=false"}
	}
	env, err := testenv.Start(testenv.Options{APIServerArgs: apiServerArgs})
	if err != nil {
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	clusters := fakehub.Names("cluster-", n)
	fmt.Fprintf(os.Stderr, "N=%d: creating managed clusters, namespaces and addons...\n", n)
	if err := fakehub.CreateClusters(ctx, c, clusters, fakehub.Options{Addon: addonName, Realistic: true}); err != nil {
		return nil, err
	}
	if coresSplit {
		if err := splitCores(); err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "N=%d: the API server and etcd on core 0, the benchmark and the manager on the others\n", n)
	}
	prof, err := newProfiler(env.Config, n)
	if err != nil {
		return nil, err
	}
	defer prof.wait()
	rawZerosCPU, err := measure(prof, env, "raw-zeros", func() (time.Duration, error) { return rawWrites(ctx, env, "raw", n, zeroSecret) })
	if err != nil {
		return nil, err
	}
	shape, err := clusterSecretShape(clusters)
	if err != nil {
		return nil, err
	}
	rawCPU, err := measure(prof, env, "raw-writes", func() (time.Duration, error) { return rawWrites(ctx, env, "raw-cluster-secrets", n, shape) })
	if err != nil {
		return nil, err
	}
	// Out of the API server's cache before the next phases, so that the manager's phases do not
	// pay for the raw writes' 20,000 objects (in the earlier rows the 2 KiB Secrets stayed).
	if err := deleteRawSecrets(ctx, env, "raw", "raw-cluster-secrets"); err != nil {
		return nil, err
	}
	rawWaveCPU, rawRecordedCPU, err := rawCSRPaces(ctx, prof, env, clusters, "")
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "all"}}); err != nil {
		return nil, err
	}
	if err := fakehub.SetDecisions(ctx, c, namespace, "all", clusters); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "fleet-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	healthAddr, err := freeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	args, err := managerCommand(ctx, env, dir, healthAddr)
	if err != nil {
		return nil, err
	}
	if prof != nil {
		if prof.managerAddr, err = freeLoopbackAddress(); err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address="+prof.managerAddr)
	}
	mgr := exec.Command(binary, args...)
	if memoryLimit != "" {
		// What the binary sets itself in a container with this memory limit.
		q, err := resource.ParseQuantity(memoryLimit)
		if err != nil {
			return nil, fmt.Errorf("--memory-limit: %w", err)
		}
		mgr.Env = append(os.Environ(), fmt.Sprintf("GOMEMLIMIT=%d", cmd.SoftMemoryLimit(q.Value())))
	}
	logPath := filepath.Join(dir, "manager.log")
	defer func() { reportManagerErrors(logPath) }()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	mgr.Stdout, mgr.Stderr = logFile, logFile
	if err := mgr.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = mgr.Process.Kill(); _, _ = mgr.Process.Wait() }()
	var peak, peakAnon int
	stopPeak := watchPeakRSS(mgr.Process.Pid, &peak, &peakAnon)
	peakStopped := false
	defer func() {
		if !peakStopped {
			stopPeak()
		}
	}()
	// The clock starts once the manager is ready (the informers of its controllers synced), as
	// on a hub where it has been running: filling the caches of a large hub is not the
	// registration's work.
	started := time.Now()
	if err := waitReady(ctx, healthAddr, mgr.Process.Pid, 10*time.Minute); err != nil {
		return nil, err
	}
	synced := time.Since(started)
	fmt.Fprintf(os.Stderr, "N=%d: manager ready (its controllers' informers synced) %s after its start\n", n, synced.Round(10*time.Millisecond))

	// The counters start once the profiles of the phase before have ended: the manager's
	// requests in that wait are not the registration's.
	prof.phase("registration")
	before, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	eventsBefore, err := testenv.WatchEvents(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	registrationReadsBefore, err := testenv.APIReads(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	cpuBefore := processCPU(mgr.Process.Pid)
	hubBefore, selfBefore := hubUsageNow(env), processCPU(os.Getpid())
	start := time.Now()
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName},
		Spec: v1alpha1.GitOpsClusterSpec{
			PlacementRef:     v1alpha1.PlacementReference{Kind: v1alpha1.PlacementKind, Name: "all"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalServerAddress: "principal.example.com"},
		}}
	if err := c.Create(ctx, goc); err != nil {
		return nil, err
	}
	deadline := start.Add(20 * time.Minute)
	for {
		g := &v1alpha1.GitOpsCluster{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: gitOpsClusterName}, g); err != nil {
			return nil, err
		}
		if meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) && int(g.Status.AvailableAgents) == n {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not Ready after 20 minutes: %+v", g.Status.Conditions)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ready := time.Since(start)
	readyCPU := processCPU(mgr.Process.Pid) - cpuBefore
	// The benchmark's own polling is counted with the manager: it is small, and it too takes
	// the servers' cores.
	eventsAtReady, err := testenv.WatchEvents(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	readsAtReady, err := testenv.APIReads(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	registrationCPU := cpuShare{client: readyCPU + processCPU(os.Getpid()) - selfBefore, took: ready}
	registrationCPU.servers, registrationCPU.etcd, registrationCPU.compactions = hubBefore.since(env)
	fmt.Fprintf(os.Stderr, "N=%d: Ready after %s; until then watch events sent %v, manager CPU %s, API server and etcd CPU %s\n", n, ready,
		testenv.DiffWrites(eventsBefore, eventsAtReady), readyCPU, registrationCPU.servers)
	// Finish the reconcile that wrote Ready before counting.
	time.Sleep(2 * time.Second)
	converged, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	// A new fleet's one-time work after Ready (the components' probes, one ManifestWork per
	// cluster) is not idle churn: the idle window, the join and the renewal wave are measured
	// once the writes have stopped.
	settled, settledAt, err := waitForQuiet(ctx, env, converged, "Ready")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "N=%d: Ready after %s, writes stopped %s later; watching the idle fleet for %s...\n", n, ready, settledAt.Sub(start)-ready, idle)
	time.Sleep(idle)
	after, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	join, joinCalls, err := joinOne(ctx, env, n)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "N=%d: renewal wave of %d CSRs...\n", n, n)
	readsBefore, err := testenv.APIReads(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	writesBefore, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	prof.phase("wave")
	cpuBefore, hubBefore, selfBefore = processCPU(mgr.Process.Pid), hubUsageNow(env), processCPU(os.Getpid())
	wave, waveCreated, err := renewalWave(ctx, env, clusters)
	if err != nil {
		return nil, err
	}
	waveCPU := cpuShare{client: processCPU(mgr.Process.Pid) - cpuBefore, took: wave}
	waveCPU.servers, waveCPU.etcd, waveCPU.compactions = hubBefore.since(env)
	waveAgentsCPU := processCPU(os.Getpid()) - selfBefore
	readsAfter, err := testenv.APIReads(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	writesAfter, err := testenv.APIWrites(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	// The raw CSR paces once more, once the wave's writes have stopped, in the state the wave
	// ran in: the fleet's objects in the API server's cache and the manager's watches open. The
	// manager never sees the raw requests (its CSR cache selects its own signer on the server)
	// nor the raw ledgers (another managed-by label, in a namespace it does not watch); its CPU
	// meanwhile is printed. The paces before the manager started ran on an API server that held
	// none of that.
	if _, _, err := waitForQuiet(ctx, env, writesAfter, "the wave"); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "N=%d: the raw CSR paces again, the fleet in place...\n", n)
	cpuBefore = processCPU(mgr.Process.Pid)
	rawWaveAfterCPU, rawRecordedAfterCPU, err := rawCSRPaces(ctx, prof, env, clusters, "-after")
	if err != nil {
		return nil, fmt.Errorf("after the wave: %w", err)
	}
	rawAfterManagerCPU := processCPU(mgr.Process.Pid) - cpuBefore
	fmt.Fprintf(os.Stderr, "N=%d: deleting the GitOpsCluster...\n", n)
	del, err := deleteFleet(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("deleting the fleet: %w", err)
	}
	// The raw writes once more, the fleet gone: the machine's pace drifts between runs by more
	// than the ratio's margin, and the two raw figures say how far it moved within this one.
	fmt.Fprintf(os.Stderr, "N=%d: the raw writes again...\n", n)
	rawAfterCPU, err := measure(prof, env, "raw-writes-after", func() (time.Duration, error) {
		return rawWrites(ctx, env, "raw-cluster-secrets-after", n, shape)
	})
	if err != nil {
		return nil, err
	}
	if err := deleteRawSecrets(ctx, env, "raw-cluster-secrets-after"); err != nil {
		return nil, err
	}
	// The manager's last profile is in before the manager is stopped.
	prof.wait()
	// The sampler's last readings (the wave's and the deletion's peak) are in before they are read.
	stopPeak()
	peakStopped = true
	byResource := testenv.DiffWrites(before, converged)
	// The benchmark's own GitOpsCluster create is not the manager's.
	byResource["gitopsclusters"]--
	if byResource["gitopsclusters"] == 0 {
		delete(byResource, "gitopsclusters")
	}
	return &result{
		ready:               ready,
		rawAfterCPU:         rawAfterCPU,
		rawZerosCPU:         rawZerosCPU,
		join:                join,
		joinCalls:           joinCalls,
		wave:                wave,
		waveCreated:         waveCreated,
		waveReads:           testenv.DiffWrites(readsBefore, readsAfter),
		waveWrites:          testenv.DiffWrites(writesBefore, writesAfter),
		readyReads:          testenv.DiffWrites(registrationReadsBefore, readsAtReady),
		rawWaveCPU:          rawWaveCPU,
		rawRecordedCPU:      rawRecordedCPU,
		rawWaveAfterCPU:     rawWaveAfterCPU,
		rawRecordedAfterCPU: rawRecordedAfterCPU,
		rawAfterManagerCPU:  rawAfterManagerCPU,
		waveCPU:             waveCPU,
		waveAgentsCPU:       waveAgentsCPU,
		writesPerCluster:    float64(testenv.TotalWrites(byResource)-byResource[probeResource]) / float64(n),
		probesPerCluster:    float64(testenv.DiffWrites(before, settled)[probeResource]) / float64(n),
		idleWrites:          testenv.TotalWrites(testenv.DiffWrites(settled, after)),
		settle:              settledAt.Sub(start) - ready,
		settleWrites:        testenv.DiffWrites(converged, settled),
		peakKiB:             peak,
		peakAnonKiB:         peakAnon,
		readyCPU:            readyCPU,
		rawCPU:              rawCPU,
		watchEvents:         testenv.DiffWrites(eventsBefore, eventsAtReady),
		registrationCPU:     registrationCPU,
		synced:              synced,
		byResource:          byResource,
		deletion:            del,
	}, nil
}

// probeResource is the resource of the components' probes; nothing else in the benchmark's
// registration writes one.
const probeResource = "manifestworks"

// releaseNamespace is where the benchmark installs the chart.
const releaseNamespace = "argocd-agent-addon"

// managerCommand returns the manager's arguments. As the chart runs it: with the chart's
// arguments, authenticated as its ServiceAccount with the RBAC the chart grants (Secrets,
// Deployments, Services and ConfigMaps only in the managed namespace), without leader
// election (a standby's lease renewals are not the manager's writes). With --admin, as
// system:masters with the binary's defaults.
func managerCommand(ctx context.Context, env *testenv.Env, dir, healthAddr string) ([]string, error) {
	common := []string{"--metrics-bind-address=0", "--health-probe-bind-address=" + healthAddr, "--zap-log-level=" + managerLogLevel, "--leader-elect=false"}
	if asAdmin {
		kubeconfig, err := env.KubeconfigFile(dir)
		if err != nil {
			return nil, err
		}
		args := append([]string{"manager", "--kubeconfig=" + kubeconfig, "--managed-namespaces=" + namespace}, common...)
		return append(args, managerArgs...), nil
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}); err != nil {
		return nil, err
	}
	install, err := testenv.InstallChart(ctx, env.Client, releaseNamespace, map[string]any{"managedNamespaces": []any{namespace}})
	if err != nil {
		return nil, err
	}
	kubeconfig, err := env.UserKubeconfigFile(dir, "manager-kubeconfig", fleet.ServiceAccountUser(releaseNamespace, install.ServiceAccount),
		fleet.ServiceAccountGroups(releaseNamespace)...)
	if err != nil {
		return nil, err
	}
	return install.Args(append(append(common, "--kubeconfig="+kubeconfig), managerArgs...)...), nil
}

// unthrottled is the env's admin connection with no client-side rate limit: the raw phases
// measure the API server, not client-go's limiter.
func unthrottled(env *testenv.Env) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// rawWrites is the API server's own pace: n Secrets, secret(0) to secret(n-1), created in
// namespace ns by a plain client with no client-side rate limit and 16 writers.
func rawWrites(ctx context.Context, env *testenv.Env, ns string, n int, secret func(i int) *corev1.Secret) (time.Duration, error) {
	c, err := client.New(unthrottled(env), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return 0, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, err
	}
	secrets := make([]*corev1.Secret, n)
	for i := range secrets {
		secrets[i] = secret(i)
		secrets[i].Namespace = ns
	}
	start := time.Now()
	err = fakehub.Parallel(secrets, func(s *corev1.Secret) error { return c.Create(ctx, s) })
	return time.Since(start), err
}

// zeroSecret is a Secret of 2 KiB of zeros.
func zeroSecret(i int) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("raw-%05d", i)}, Data: map[string][]byte{"data": make([]byte, 2048)}}
}

// clusterSecretShape returns Secrets of the shape and size of the manager's agent cluster
// secrets for clusters, built by the manager's own code, with a client certificate, key and CA
// issued as the manager issues them (one set shared by all: the content does not change the
// API server's work). The manager also copies a ManagedCluster's labels onto its secret; the
// benchmark's ManagedClusters have none.
func clusterSecretShape(clusters []string) (func(i int) *corev1.Secret, error) {
	now := time.Now()
	ca, err := pki.NewCA("raw-writes", 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	kp, err := ca.IssueClientCert(pkix.Name{CommonName: clusters[0]}, 24*time.Hour, now)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := agentsecret.NewConfig(kp, ca.CertPEM)
	if err != nil {
		return nil, err
	}
	owner := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: gitOpsClusterName}}
	cfg := config.Default()
	return func(i int) *corev1.Secret {
		return clustersecrets.ClusterSecret(cfg, owner, namespace, clusters[i], tlsConfig)
	}, nil
}

// watchPeakRSS samples the process's high-water mark of resident memory (VmHWM), and the
// largest anonymous part of it seen (RssAnon: the Go runtime's memory, without the binary's
// file-backed code pages), until stopped.
func watchPeakRSS(pid int, peak, peakAnon *int) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			status := procStatus(pid)
			*peak = max(*peak, status["VmHWM"])
			*peakAnon = max(*peakAnon, status["RssAnon"])
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// waitForQuiet waits until the API server has taken no write for quietFor (at most 10 minutes
// after from), and returns its write counts then and when the last write was seen.
func waitForQuiet(ctx context.Context, env *testenv.Env, from map[string]int, after string) (map[string]int, time.Time, error) {
	const quietFor = 5 * time.Second
	last, lastChange := from, time.Now()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Since(lastChange) < quietFor {
		if time.Now().After(deadline) {
			return nil, time.Time{}, fmt.Errorf("the manager kept writing for 10 minutes after %s: %v", after, testenv.DiffWrites(from, last))
		}
		time.Sleep(time.Second)
		now, err := testenv.APIWrites(ctx, env.Config)
		if err != nil {
			return nil, time.Time{}, err
		}
		if testenv.TotalWrites(testenv.DiffWrites(last, now)) > 0 {
			last, lastChange = now, time.Now()
		}
	}
	return last, lastChange, nil
}

// processCPU is the user and system CPU time a process has used, from /proc/<pid>/stat.
func processCPU(pid int) time.Duration {
	_, f, ok := procStat(pid)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// procStat reads /proc/<pid>/stat: the command name and the fields after it, from the state
// on ("pid (comm) state ppid ..."). The command may hold spaces and parentheses, so it ends
// at the last ")".
func procStat(pid int) (command string, fields []string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, false
	}
	stat := string(data)
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", nil, false
	}
	return stat[open+1 : closing], strings.Fields(stat[closing+1:]), true
}

// procStatus reads the KiB fields of /proc/<pid>/status.
func procStatus(pid int) map[string]int {
	out := map[string]int{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if f := strings.Fields(rest); ok && len(f) == 2 && f[1] == "kB" {
			out[name], _ = strconv.Atoi(f[0])
		}
	}
	return out
}

// freeLoopbackAddress is a loopback address with a port no one listens on now.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// waitReady polls the manager's readiness endpoint, which answers once the informers its
// controllers registered have synced. It stops early when the manager exits.
func waitReady(ctx context.Context, addr string, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	httpClient := &http.Client{Timeout: 5 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := httpClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !running(pid) {
			return fmt.Errorf("the manager exited before it was ready (its log is reported below)")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager was not ready %s after its start", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running reports whether process pid exists and has not exited (a zombie waits for its
// parent's Wait, which the benchmark does only at the end).
func running(pid int) bool {
	_, f, ok := procStat(pid)
	return ok && len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
