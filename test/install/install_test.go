// Package install follows the install pages as a person would, against a real API server with
// OCM's CRDs: the README's "Install on a real hub" steps, and docs/install.md's switch-over from
// argocd-pull-integration's own argocd-agent-addon chart. Helm's SDK installs the chart; the
// manager runs as a process with the arguments and the ServiceAccount the chart gave it.
// test/fakehub stands in for OCM's placement controller and addon-manager.
package install

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// codeBlocks returns the fenced code blocks of a Markdown text, each with its lines, in order.
func codeBlocks(text string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if in {
				blocks = append(blocks, cur)
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, trimmed)
		}
	}
	return blocks
}

// commands joins a shell block's continued lines and splits each command into words (the
// pages' commands quote nothing).
func commands(block []string) [][]string {
	var out [][]string
	joined := ""
	for _, line := range block {
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasSuffix(line, "\\") {
			joined += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		joined += line
		if w := strings.Fields(joined); len(w) > 0 {
			out = append(out, w)
		}
		joined = ""
	}
	return out
}

// section returns the text of a Markdown page from heading to the next heading of its level.
func section(t *testing.T, page, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), page))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", page, heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	rest := text[i+len(heading)+2:]
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// hubBeforeInstall starts a hub as the install pages find it: OCM's CRDs, a managed cluster
// cluster1 with the addon's name, and the hub's Argo CD namespace argocd (Argo CD itself does not
// run here). It returns the hub and a kubeconfig file for Helm.
func hubBeforeInstall(t *testing.T) (*testenv.Env, string) {
	t.Helper()
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.CreateClusters(ctx, env.Client, []string{"cluster1"}, fakehub.Options{Addon: "argocd-agent-addon"}); err != nil {
		t.Fatal(err)
	}
	return env, kubeconfig
}

// helmInstallCmd is a `helm install` command line of a page.
type helmInstallCmd struct {
	release, chart, namespace string
	createNamespace           bool
	values                    map[string]any
}

func parseHelmInstall(t *testing.T, words []string) helmInstallCmd {
	t.Helper()
	if len(words) < 4 || words[0] != "helm" || words[1] != "install" {
		t.Fatalf("not a helm install command: %v", words)
	}
	h := helmInstallCmd{release: words[2], chart: words[3], values: map[string]any{}}
	for i := 4; i < len(words); i++ {
		switch words[i] {
		case "--namespace", "-n":
			i++
			h.namespace = words[i]
		case "--create-namespace":
			h.createNamespace = true
		case "--set":
			i++
			if err := strvals.ParseInto(words[i], h.values); err != nil {
				t.Fatalf("--set %s: %v", words[i], err)
			}
		default:
			t.Fatalf("helm install flag %q: the test does not know it", words[i])
		}
	}
	return h
}

// run installs the chart as the command says, with Helm's SDK. The chart path is the
// checkout's (the page's ./charts/argocd-agent-addon).
func (h helmInstallCmd) run(t *testing.T, kubeconfig string) {
	t.Helper()
	if h.chart != "./charts/argocd-agent-addon" {
		t.Fatalf("the page installs %s, not the checkout's chart", h.chart)
	}
	ch, err := loader.Load(filepath.Join(testenv.RepoRoot(), h.chart))
	if err != nil {
		t.Fatal(err)
	}
	ac, err := chartrender.Config(kubeconfig, h.namespace, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(ac)
	install.ReleaseName, install.Namespace, install.CreateNamespace = h.release, h.namespace, h.createNamespace
	install.Timeout = time.Minute
	if _, err := install.Run(ch, h.values); err != nil {
		t.Fatalf("helm install %s: %v", h.release, err)
	}
}

// applyFiles does `kubectl apply -f` of the checkout's files: creates every object they hold,
// or updates it when it exists.
func applyFiles(t *testing.T, c client.Client, words []string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for i := 2; i < len(words); i++ {
		if words[i] != "-f" {
			t.Fatalf("kubectl apply argument %q: the test does not know it", words[i])
		}
		i++
		f, err := os.Open(filepath.Join(testenv.RepoRoot(), words[i]))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(f), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				t.Fatalf("%s: %v", words[i], err)
			}
			if len(u.Object) == 0 {
				continue
			}
			apply(t, c, u)
			objs = append(objs, u)
		}
		_ = f.Close()
	}
	return objs
}

// apply creates u, or merges its labels, annotations and spec into the existing object.
func apply(t *testing.T, c client.Client, u *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	err := c.Create(ctx, u.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(u.GroupVersionKind())
		if err = c.Get(ctx, client.ObjectKeyFromObject(u), cur); err == nil {
			for k, v := range u.GetAnnotations() {
				a := cur.GetAnnotations()
				if a == nil {
					a = map[string]string{}
				}
				a[k] = v
				cur.SetAnnotations(a)
			}
			if spec, ok := u.Object["spec"]; ok {
				cur.Object["spec"] = spec
			}
			err = c.Update(ctx, cur)
		}
	}
	if err != nil {
		t.Fatalf("applying %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

// runChartManager runs the manager the chart installed, as a process of the project's binary:
// the arguments of the chart's Deployment, authenticated with a token of the chart's ServiceAccount (so the chart's
// RBAC is all it has), its ports moved off the chart's to free ones. It stops with the test.
func runChartManager(t *testing.T, env *testenv.Env, namespace, deployment string) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
		t.Fatalf("the chart's manager Deployment: %v", err)
	}
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			args = c.Args
		}
	}
	if len(args) == 0 || args[0] != "manager" {
		t.Fatalf("the manager container's arguments: %v", args)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, d.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "manager", Namespace: namespace}
	kc.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	bin := managerBinary(t)
	proc := exec.Command(bin, append(args, "--kubeconfig="+path, "--metrics-bind-address=0", "--health-probe-bind-address="+freeAddr(t))...)
	proc.Stdout, proc.Stderr = io.Discard, io.Discard
	if testing.Verbose() {
		proc.Stdout, proc.Stderr = os.Stderr, os.Stderr
	}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	})
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// managerBinary builds the project's binary once for the package; the manager runs as its own
// process, as in the chart's pod.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "install-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin, buildErr = testenv.BuildManager(dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// loadBalance writes the status a cloud's load balancer would give a Service: no cloud runs here.
func loadBalance(t *testing.T, c client.Client, namespace, name, ip string) {
	t.Helper()
	svc := &corev1.Service{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
		t.Fatalf("Service %s/%s: %v", namespace, name, err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if err := c.Status().Update(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
}

// argValue returns the value of --name=value in args, or "".
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		_ = os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
