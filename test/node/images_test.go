package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	argocdImageRef = "localhost/argocd:v3.6.1"
	redisImageRef  = "localhost/redis:local"
)

// TestArgoCDAndRedisImages builds the Argo CD and Redis images from this machine's Debian
// packages, imports them into a real node, and runs them as Argo CD's manifests do: the
// tools Argo CD's components call (git, ssh, gpg, cp and a shell) as uid 999 on a read-only
// root, and the upstream Redis Deployment with its password from argocd admin
// redis-initial-password.
func TestArgoCDAndRedisImages(t *testing.T) {
	node.RequireForTest(t)
	for _, b := range []string{"redis-cli", "git"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s is missing: run hack/node-packages.sh as root", b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	scratch := t.TempDir()

	argocdDir := argocdBinariesDir(t, root)
	start := time.Now()
	argocdTar, err := node.BuildArgoCDImage(argocdDir, filepath.Join(scratch, "build"), argocdImageRef)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %s, %s (%s)", argocdImageRef, imageFileSize(t, argocdTar), time.Since(start).Round(time.Millisecond), argocdTar)
	start = time.Now()
	redisTar, err := node.BuildRedisImage(filepath.Join(scratch, "build"), redisImageRef)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %s, %s (%s)", redisImageRef, imageFileSize(t, redisTar), time.Since(start).Round(time.Millisecond), redisTar)

	c := startRealCluster(ctx, t, "images-test", 230, 239)
	n, cs, apiServer := c.node, c.cs, c.env.Config.Host
	for _, tar := range []string{argocdTar, redisTar} {
		start := time.Now()
		if err := n.ImportImage(tar); err != nil {
			t.Fatal(err)
		}
		t.Logf("imported %s in %s", filepath.Base(tar), time.Since(start).Round(time.Millisecond))
	}

	ns := "argocd"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A git repository served over dumb HTTP from the host end of the node's veth, which pods
	// reach as they reach the API server: git's http remote helper is what https uses too.
	repoURL, head, stopHTTP := serveGitRepo(t, n.HostIP(), scratch)
	defer stopHTTP()

	t.Run("tools", func(t *testing.T) { runArgoCDTools(ctx, t, n, cs, ns, repoURL, head) })
	t.Run("redis", func(t *testing.T) { runUpstreamRedis(ctx, t, n, cs, root, ns, apiServer) })

	stopHTTP()
	c.stop()
}

// runArgoCDTools runs, as Argo CD's pods run, the repo-server's init container and then the
// programs Argo CD's components call, and checks what they print.
func runArgoCDTools(ctx context.Context, t *testing.T, n *node.Node, cs kubernetes.Interface, ns, repoURL, head string) {
	script := strings.Join([]string{
		"set -e",
		`echo "uid=$(id -u) user=$(id -un) home=$HOME pwd=$(pwd)"`,
		"argocd version --client",
		"/var/run/argocd/argocd version --client",
		"test -L /var/run/argocd/argocd-cmp-server && echo cmp-link=ok",
		"git --version",
		"git ls-remote " + repoURL,
		"ssh -V 2>&1",
		"gpg --version | head -n 1",
		// Argo CD keeps its keyring in /app/config/gpg/keys; making a key exercises gpg-agent.
		"gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key 'Test <test@example.org>' ed25519 sign never 2>&1 | tail -n 1",
		`echo "keys=$(gpg --list-keys --with-colons | grep -c '^pub')"`,
		"gpgconf --kill gpg-agent",
		"test -x /usr/bin/tini && echo tini=ok",
		"if touch /rootfs-write 2>/dev/null; then echo rootfs=writable; else echo rootfs=read-only; fi",
		"echo done",
	}, "\n")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-tools", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{
				// The repo-server's init container, as Argo CD's manifest has it.
				Name: "copyutil", Image: argocdImageRef, ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c"},
				Args:            []string{"/bin/cp /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -sf /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server"},
				SecurityContext: upstreamSecurityContext(),
				VolumeMounts:    []corev1.VolumeMount{{Name: "var-files", MountPath: "/var/run/argocd"}},
			}},
			Containers: []corev1.Container{{
				Name: "tools", Image: argocdImageRef, ImagePullPolicy: corev1.PullNever,
				// Args, not Command, as Argo CD's manifests: the image's entrypoint (tini) runs them.
				Args:            []string{"sh", "-c", script},
				Env:             []corev1.EnvVar{{Name: "GNUPGHOME", Value: "/app/config/gpg/keys"}},
				SecurityContext: upstreamSecurityContext(),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "var-files", MountPath: "/var/run/argocd"},
					{Name: "gpg-keyring", MountPath: "/app/config/gpg/keys"},
					{Name: "tmp", MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "var-files", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "gpg-keyring", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	// Admission refuses pods until the controller manager has made the default ServiceAccount.
	poll(ctx, t, n, "pod argocd-tools created", time.Minute, func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, err
	})
	start := time.Now()
	var phase corev1.PodPhase
	poll(ctx, t, n, "pod argocd-tools done", 3*time.Minute, func() (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, fmt.Errorf("phase %s: %s", phase, podContainerStates(p))
	})
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "tools"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod logs: %v", err)
	}
	t.Logf("pod argocd-tools %s after %s:\n%s", phase, time.Since(start).Round(time.Second), strings.TrimSpace(string(logs)))
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod argocd-tools %s", phase)
	}
	for _, want := range []string{
		"uid=999 user=argocd home=/home/argocd pwd=/home/argocd",
		"argocd: v3.6.1",
		"git version 2.",
		head + "\trefs/heads/main",
		"OpenSSH_",
		"gpg (GnuPG) 2.",
		"keys=1",
		"tini=ok",
		"cmp-link=ok",
		"rootfs=read-only",
		"done",
	} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("pod log lacks %q", want)
		}
	}
	if c := strings.Count(string(logs), "argocd: v3.6.1"); c != 2 {
		t.Errorf("argocd version printed %d times, want 2 (the image's binary and the init container's copy)", c)
	}
}

// runUpstreamRedis applies Argo CD's Redis Deployment, ServiceAccount and RBAC as the
// project ships them for the default pair's Argo CD release, with the local images, and
// talks to Redis from the node's network.
func runUpstreamRedis(ctx context.Context, t *testing.T, n *node.Node, cs kubernetes.Interface, root, ns, apiServer string) {
	dir := filepath.Join(root, "pkg", "spoke", "upstream", version.ArgoCDVersion)
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	var deploy appsv1.Deployment
	for f, obj := range map[string]any{
		"serviceaccount_argocd-redis.json": &sa, "role_argocd-redis.json": &role,
		"rolebinding_argocd-redis.json": &binding, "deployment_argocd-redis.json": &deploy,
	} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	spec := &deploy.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || len(spec.Containers) != 1 {
		t.Fatalf("upstream redis Deployment: want one init container and one container, got %d and %d", len(spec.InitContainers), len(spec.Containers))
	}
	spec.InitContainers[0].Image, spec.InitContainers[0].ImagePullPolicy = argocdImageRef, corev1.PullNever
	// envtest's serving certificate names the API server's own address, not the kubernetes
	// Service's cluster IP: the in-cluster client is pointed at that address instead.
	u, err := url.Parse(apiServer)
	if err != nil {
		t.Fatal(err)
	}
	spec.InitContainers[0].Env = append(spec.InitContainers[0].Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()})
	spec.Containers[0].Image, spec.Containers[0].ImagePullPolicy = redisImageRef, corev1.PullNever
	t.Logf("redis container args (upstream): %q", spec.Containers[0].Args)

	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range binding.Subjects {
		binding.Subjects[i].Namespace = ns
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var pod corev1.Pod
	poll(ctx, t, n, "redis pod Ready", 3*time.Minute, func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=argocd-redis"})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = pods.Items[0]
		for _, c := range pod.Status.InitContainerStatuses {
			// A failed init container restarts with a back-off: its log says why at once.
			if c.RestartCount > 0 {
				logs, _ := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, Previous: true}).DoRaw(ctx)
				t.Fatalf("init container %s failed (%s):\n%s", c.Name, podContainerStates(&pod), logs)
			}
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s: %s", pod.Status.Phase, podContainerStates(&pod))
	})
	t.Logf("redis pod %s Ready at %s after %s", pod.Name, pod.Status.PodIP, time.Since(start).Round(time.Second))
	if u := pod.Spec.SecurityContext.RunAsUser; u == nil || *u != node.RedisUID {
		t.Errorf("redis pod runs as %v, want %d", u, node.RedisUID)
	}

	secret, err := cs.CoreV1().Secrets(ns).Get(ctx, "argocd-redis", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the init container (argocd admin redis-initial-password) made no secret: %v", err)
	}
	password := string(secret.Data["auth"])
	if password == "" {
		t.Fatal("secret argocd-redis has no auth")
	}
	// redis-cli's exit status does not tell a refusal from a failure to connect; its output does.
	cli := func(args ...string) string {
		out, _ := n.InNetns("redis-cli", append([]string{"-h", pod.Status.PodIP, "-p", "6379", "--no-auth-warning"}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	// Upstream's argocd-redis has no readiness probe: its pod is Ready once the container starts,
	// which on a busy machine can be a moment before redis listens (Argo CD's components retry).
	poll(ctx, t, n, "redis answering PING with the password", 30*time.Second, func() (bool, error) {
		if out := cli("-a", password, "PING"); out != "PONG" {
			return false, fmt.Errorf("PING: %q", out)
		}
		return true, nil
	})
	if out := cli("PING"); !strings.Contains(out, "NOAUTH") {
		t.Errorf("PING without the password: %q, want NOAUTH", out)
	}
	if out := cli("-a", "wrong", "PING"); out == "PONG" {
		t.Errorf("PING with a wrong password answered PONG")
	}
	// The Deployment's args turn persistence off; the entrypoint made them redis-server's.
	if out := cli("-a", password, "CONFIG", "GET", "appendonly"); !strings.Contains(out, "no") {
		t.Errorf("CONFIG GET appendonly: %q", out)
	}
	if out := cli("-a", password, "CONFIG", "GET", "dir"); !strings.Contains(out, "/data") {
		t.Errorf("CONFIG GET dir: %q, want /data", out)
	}
	logs, _ := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "redis"}).DoRaw(ctx)
	t.Logf("redis log:\n%s", strings.TrimSpace(string(logs)))
	if !strings.Contains(string(logs), "Ready to accept connections") {
		t.Errorf("redis log lacks %q", "Ready to accept connections")
	}
}

// upstreamSecurityContext is what Argo CD's manifests set on every container.
func upstreamSecurityContext() *corev1.SecurityContext {
	yes, no := true, false
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   &yes,
		RunAsNonRoot:             &yes,
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func podContainerStates(p *corev1.Pod) string {
	var s []string
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			s = append(s, fmt.Sprintf("%s waiting (%s: %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			s = append(s, fmt.Sprintf("%s terminated (%s, exit %d: %s)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message))
		case cs.State.Running != nil:
			s = append(s, cs.Name+" running")
		}
	}
	return strings.Join(s, "; ")
}

// serveGitRepo makes a one-commit repository, served over git's dumb HTTP protocol on ip, and
// returns its URL, its commit and the server's stop.
func serveGitRepo(t *testing.T, ip, scratch string) (repoURL, head string, stop func()) {
	work, bare := filepath.Join(scratch, "git-work"), filepath.Join(scratch, "git", "repo.git")
	git := func(dir string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.org", "GIT_CONFIG_NOSYSTEM=1", "HOME="+scratch)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "first")
	head = git(work, "rev-parse", "HEAD")
	git(scratch, "clone", "-q", "--bare", work, bare)
	// The files a dumb-HTTP client reads instead of asking a smart server.
	git(bare, "update-server-info")

	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Dir(bare))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return fmt.Sprintf("http://%s/repo.git", ln.Addr()), head, func() { _ = srv.Close() }
}

func imageFileSize(t *testing.T, path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%.1f MB", float64(fi.Size())/(1<<20))
}

func argocdBinariesDir(t *testing.T, root string) string {
	if d := os.Getenv("ARGOCD_BINARIES_DIR"); d != "" {
		return d
	}
	cmd := exec.Command(filepath.Join(root, "hack", "argocd-binaries.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/argocd-binaries.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}
