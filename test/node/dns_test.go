package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// TestClusterDNSAnswersForServicesOnly runs CoreDNS as a kubeadm cluster does on a real node
// and checks, from a pod, that a Service's full name and its short name (through the pod's
// search path) resolve to its ClusterIP and answer there, that a name outside the cluster
// does not resolve, and that no packet from the pods went anywhere off the fleet.
func TestClusterDNSAnswersForServicesOnly(t *testing.T) {
	requireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := startRealCluster(ctx, t, "dns-test", 220, 229)
	cs, n := c.cs, c.node
	t.Cleanup(func() {
		if t.Failed() && !c.stopped {
			// The test's context is over by now.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			t.Logf("coredns log:\n%s", coreDNSLog(ctx, c, 40))
		}
	})
	// Before any pod runs, so that every packet of theirs is counted.
	watchEgress(t, n)

	tarPath, ref, err := node.BuildCoreDNSImage(c.binDir, c.scratch)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(tarPath); err != nil {
		t.Fatal(err)
	}
	objs := node.ClusterDNSObjects(ref)
	server, err := url.Parse(c.env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			// envtest's serving certificate names the node's host address but not the
			// kubernetes Service's 10.0.0.1, so CoreDNS is sent to the address it names.
			ctr := &d.Spec.Template.Spec.Containers[0]
			ctr.Env = append(ctr.Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: server.Hostname()},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: server.Port()})
		}
	}
	created := time.Now()
	for _, o := range objs {
		if err := c.env.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	var dnsPod corev1.Pod
	c.poll("CoreDNS Ready", 3*time.Minute, func() (bool, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, err
		}
		if len(pods.Items) == 0 {
			return false, fmt.Errorf("no CoreDNS pod yet")
		}
		dnsPod = pods.Items[0]
		return podReady(&dnsPod), fmt.Errorf("pod %s phase %s", dnsPod.Name, dnsPod.Status.Phase)
	})
	readyIn := time.Since(created)
	var started time.Time
	if st := dnsPod.Status.ContainerStatuses; len(st) == 1 && st[0].State.Running != nil {
		started = st[0].State.Running.StartedAt.Time
	}
	t.Logf("CoreDNS %s Ready %s after its objects were created (container started %s after), at %s",
		ref, readyIn.Round(100*time.Millisecond), started.Sub(created).Round(time.Second), dnsPod.Status.PodIP)
	mem := coreDNSMemory(t, n)
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	// The resident set counts the binary's mapped pages, shared with the page cache; the
	// anonymous part is CoreDNS's own.
	t.Logf("CoreDNS memory: RSS %s (anonymous %s), container memory cgroup %s", mib(mem["VmRSS"]), mib(mem["RssAnon"]), mib(mem["cgroup"]))

	// A Service with a hello pod behind it.
	ns := "default"
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		StringData: map[string]string{"token": "s3cr3t"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	helloBin := c.helloImage()
	const svcName = "dns-target"
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svcName},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := helloPod(svcName, "hi-over-dns")
	c.poll("pod "+svcName+" created", time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, target, metav1.CreateOptions{})
		return err == nil, err
	})
	c.waitPodReady(ns, svcName, 3*time.Minute)
	c.poll("a ready endpoint of "+svcName, time.Minute, func() (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svcName})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	// kube-proxy programs the Service's rules after the EndpointSlice turns ready; until then
	// its reject rule refuses the ClusterIP. The client pod below tests DNS, not that race.
	c.poll("the ClusterIP of "+svcName+" answering on the node", time.Minute, func() (bool, error) {
		out, err := n.InNetns(helloBin, "-get", "http://"+svc.Spec.ClusterIP+"/").CombinedOutput()
		return err == nil && strings.Contains(string(out), "greeting=hi-over-dns"), fmt.Errorf("%v: %s", err, out)
	})

	// The client resolves as any program in a pod does: the kubelet's resolv.conf, with
	// the cluster DNS as nameserver and the namespace's search path.
	fqdn := svcName + "." + ns + ".svc." + node.ClusterDomain
	outside := "example.com"
	nonRoot := true
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-client"},
		Spec: corev1.PodSpec{
			RestartPolicy:   corev1.RestartPolicyNever,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &nonRoot},
			Containers: []corev1.Container{{
				Name:            "client",
				Image:           "localhost/hello:local",
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"-resolve", fqdn, "-resolve", svcName, "-resolve", outside, "-get", "http://" + svcName + "/"},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	c.poll("pod dns-client done", 3*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, client.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, fmt.Errorf("phase %s", phase)
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs(client.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("dns-client logs: %v", err)
	}
	t.Logf("dns-client (%s):\n%s", phase, strings.TrimSpace(string(logs)))
	if phase != corev1.PodSucceeded {
		t.Errorf("dns-client ended %s", phase)
	}
	results := map[string]string{}
	var resolvConf string
	for _, line := range strings.Split(string(logs), "\n") {
		if rest, ok := strings.CutPrefix(line, "resolve "); ok {
			name, result, _ := strings.Cut(rest, ": ")
			results[name] = result
		}
		if rest, ok := strings.CutPrefix(line, "resolv.conf: "); ok {
			resolvConf = rest
		}
	}
	for _, want := range []string{"nameserver " + node.ClusterDNSIP, "search " + ns + ".svc." + node.ClusterDomain} {
		if !strings.Contains(resolvConf, want) {
			t.Errorf("the pod's resolv.conf lacks %q: %q", want, resolvConf)
		}
	}
	for _, name := range []string{fqdn, svcName} {
		if got := results[name]; !strings.HasPrefix(got, svc.Spec.ClusterIP+" in ") {
			t.Errorf("%s resolved to %q, want the ClusterIP %s", name, got, svc.Spec.ClusterIP)
		}
	}
	if got, ok := results[outside]; !ok || !strings.HasPrefix(got, "error") {
		t.Errorf("%s resolved (%q): the cluster DNS must answer for the cluster's names only", outside, got)
	}
	if !strings.Contains(string(logs), "greeting=hi-over-dns") {
		t.Errorf("GET http://%s/ through the ClusterIP did not reach the pod behind it", svcName)
	}

	counts := egressCounts(t, n)
	t.Logf("packets counted in the node's netns: %v", counts)
	if counts["dns-cluster"] == 0 {
		t.Errorf("no DNS query to %s was counted: the counters see nothing", node.ClusterDNSIP)
	}
	for _, k := range []string{"off-fleet", "dns-elsewhere", "node-dns"} {
		if counts[k] != 0 {
			t.Errorf("%d packets %s: something tried to leave the fleet", counts[k], k)
		}
	}
	t.Logf("coredns log:\n%s", coreDNSLog(ctx, c, 10))

	c.stop()
}

// TestClusterDNSObjectsForwardNowhere checks, without a node, what keeps the cluster DNS on
// this machine: its Corefile has no plugin that sends a query anywhere, and CoreDNS gets no
// nameserver of the node's.
func TestClusterDNSObjectsForwardNowhere(t *testing.T) {
	var corefile string
	var dep *appsv1.Deployment
	var svc *corev1.Service
	for _, o := range node.ClusterDNSObjects("localhost/coredns:test") {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			corefile = o.Data["Corefile"]
		case *appsv1.Deployment:
			dep = o
		case *corev1.Service:
			svc = o
		}
	}
	var plugins []string
	for _, line := range strings.Split(corefile, "\n") {
		// A plugin is a line one level into the server block.
		if strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") && !strings.HasPrefix(strings.TrimSpace(line), "}") {
			plugins = append(plugins, strings.Fields(line)[0])
		}
	}
	want := "errors health ready kubernetes prometheus cache loop reload"
	if got := strings.Join(plugins, " "); got != want {
		t.Errorf("Corefile plugins %q, want %q:\n%s", got, want, corefile)
	}
	if dep == nil || dep.Spec.Template.Spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("CoreDNS must take the node's (empty) resolver configuration, not its own: %+v", dep)
	}
	if svc == nil || svc.Spec.ClusterIP != node.ClusterDNSIP || !strings.HasPrefix(node.ClusterDNSIP, "10.0.0.") {
		t.Errorf("kube-dns must sit at %s, in the service range 10.0.0.0/24: %+v", node.ClusterDNSIP, svc)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchEgress counts, in the node's network namespace, what its pods send to addresses
// outside the fleet (pods, Services and the nodes' veths), DNS queries to anything but the
// cluster DNS, the queries to it, and DNS queries the node itself sends. The table goes with
// the namespace when the node stops.
func watchEgress(t *testing.T, n *node.Node) {
	t.Helper()
	pods := n.PodCIDR()
	rules := fmt.Sprintf(`table ip fleet_dns_watch {
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		ip saddr %[1]s ip daddr != { %[1]s, 10.0.0.0/24, 10.251.0.0/16 } counter comment "off-fleet"
		ip saddr %[1]s meta l4proto { tcp, udp } th dport 53 ip daddr != %[2]s counter comment "dns-elsewhere"
		ip saddr %[1]s meta l4proto { tcp, udp } th dport 53 ip daddr %[2]s counter comment "dns-cluster"
	}
	chain out {
		type filter hook output priority -300; policy accept;
		meta l4proto { tcp, udp } th dport 53 counter comment "node-dns"
	}
}
`, pods, node.ClusterDNSIP)
	cmd := n.InNetns("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
}

func egressCounts(t *testing.T, n *node.Node) map[string]int {
	t.Helper()
	out, err := n.InNetns("nft", "list", "table", "ip", "fleet_dns_watch").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v: %s", err, out)
	}
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "([^"]+)"`).FindAllStringSubmatch(string(out), -1) {
		counts[m[2]], _ = strconv.Atoi(m[1])
	}
	if len(counts) != 4 {
		t.Fatalf("nft list: want 4 counters, got %v:\n%s", counts, out)
	}
	return counts
}

// coreDNSMemory finds the node's CoreDNS process and returns, in bytes, its VmRSS and RssAnon
// and its container's memory cgroup usage (cgroup v1 or v2) as "cgroup".
func coreDNSMemory(t *testing.T, n *node.Node) map[string]int64 {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid := e.Name()
		cmdline, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), "/coredns\x00") {
			continue
		}
		cg, _ := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
		if !strings.Contains(string(cg), n.CgroupRoot()+"/") {
			continue // another node's
		}
		status, err := os.Open(filepath.Join("/proc", pid, "status"))
		if err != nil {
			continue
		}
		mem := map[string]int64{}
		sc := bufio.NewScanner(status)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 3 && f[2] == "kB" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				mem[strings.TrimSuffix(f[0], ":")] = kb << 10
			}
		}
		status.Close()
		for _, line := range strings.Split(string(cg), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			var file string
			switch {
			case parts[0] == "0" && parts[1] == "":
				file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.current")
			case strings.Contains(","+parts[1]+",", ",memory,"):
				file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.usage_in_bytes")
			default:
				continue
			}
			if b, err := os.ReadFile(file); err == nil {
				mem["cgroup"], _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			}
		}
		return mem
	}
	t.Errorf("no /coredns process under %s", n.CgroupRoot())
	return nil
}

// coreDNSLog is the end of the CoreDNS pod's log, through the API server.
func coreDNSLog(ctx context.Context, c *realCluster, lines int64) string {
	pods, err := c.cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Sprintf("no CoreDNS pod: %v", err)
	}
	b, err := c.cs.CoreV1().Pods(metav1.NamespaceSystem).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}
