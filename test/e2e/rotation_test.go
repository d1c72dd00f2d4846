package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Scenario 4: renew cluster1's agent client certificate and restart the agent with it.
//
// Real: OCM's registration agent on cluster1 notices that the client certificate secret is
// gone, makes a new key and CSR on the hub, this project's signer checks and signs it, and the
// registration agent writes the new certificate into the secret on cluster1. Also real: the
// `argocd-agent-addon tools cert-reloader` binary, exactly the sidecar of the agent pod, watching
// a folder and sending SIGTERM to the agent process when the files change.
//
// Stand-ins for the kubelet, since no pod runs here: the test copies the secret's content into
// that folder the way the kubelet updates a secret volume (timestamped folder, atomic ..data
// symlink swap), and restarts the stand-in agent process when it exits (restartPolicy Always).
// The stand-in agent is this test binary run under another name: like argocd-agent it reads
// the certificate once at start-up and keeps it until it is stopped.
//
// Why the renewal is forced (the secret is deleted) rather than waited for: OCM v1.2.1's
// registration agent renews when 20-25 % of the lifetime is left, but it looks at an addon's
// certificate only on events or at its 5-minute resync (register.ControllerResyncInterval), and
// the signer's minimum lifetime is 1h (--agent-cert-validity). A shorter test-only lifetime
// would still wait for the resync, so no such flag was added; deleting the secret is the path
// OCM takes for "no valid client certificate" and exercises the same CSR, signer and secret
// write as a timed renewal.
func (s *suite) scenarioRotation(t *testing.T) {
	ctx := ctxFor(t)
	const cluster = "cluster1"
	old, sec, err := s.clientCert(ctx, cluster)
	if err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	oldFP := pki.Fingerprint(old)

	// The mounted secret volume, at first with the current certificate.
	mount := filepath.Join(s.tmp, "cert-reloader", strings.ReplaceAll(signerName, "/", "-"))
	if err := projectSecret(mount, sec.Data); err != nil {
		t.Fatal(err)
	}
	// In the pod the reloader sees only the pod's processes (shared process namespace). Here
	// it sees the whole machine, so the stand-in runs under a name no other process has.
	procName := fmt.Sprintf("argocd-agent-e2e-%d", os.Getpid())
	agent, err := startSupervised(procName, filepath.Join(mount, corev1.TLSCertKey), filepath.Join(s.f.LogDir(), "cluster1-standin-agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer agent.stop()
	s.eventually(t, "stand-in agent started with the current certificate", 30*time.Second, func(context.Context) (bool, string) {
		loads := agent.loaded()
		return len(loads) == 1 && loads[0] == oldFP, fmt.Sprintf("loaded %v", loads)
	})

	reloader, err := s.f.StartProcess(fleet.ProcessSpec{
		Name: "cluster1-cert-reloader",
		Path: s.managerBin,
		Env:  testenv.ProjectProcessEnv(),
		Args: []string{"tools", "cert-reloader", "--watch-dir", mount, "--process-name", procName, "--interval", "500ms"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reloader.Stop(5 * time.Second) }()
	s.eventually(t, "cert-reloader watching the mounted folder", 30*time.Second, func(context.Context) (bool, string) {
		data, _ := os.ReadFile(reloader.LogPath)
		return strings.Contains(string(data), `"watching"`), string(data)
	})

	// Force the renewal on cluster1 (see above).
	start := time.Now()
	if err := s.spokes[cluster].Delete(ctx, &corev1.Secret{ObjectMeta: sec.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	renewed := s.waitClientCert(t, cluster, oldFP)
	newFP := pki.Fingerprint(renewed)
	t.Logf("%s: certificate renewed by OCM + this project's signer in %s (old %s…, new %s…)", cluster,
		time.Since(start).Round(100*time.Millisecond), oldFP[:16], newFP[:16])
	_, sec, err = s.clientCert(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}

	// Stand-in kubelet: the secret volume follows the secret.
	if err := projectSecret(mount, sec.Data); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "cert-reloader restarted the agent, which loaded the new certificate", 30*time.Second, func(context.Context) (bool, string) {
		loads := agent.loaded()
		return len(loads) >= 2 && loads[len(loads)-1] == newFP, fmt.Sprintf("loaded %v; exits %v", loads, agent.exits())
	})
	if loads := agent.loaded(); len(loads) != 2 {
		t.Errorf("the agent started %d times (%v), want exactly twice: once per certificate", len(loads), loads)
	}
	if exits := agent.exits(); len(exits) != 1 || !strings.Contains(exits[0], "terminated") {
		t.Errorf("the first agent process should have ended on SIGTERM from the reloader; exits: %v", exits)
	}
	data, _ := os.ReadFile(reloader.LogPath)
	if !strings.Contains(string(data), "certificate changed; restarting") {
		t.Errorf("the cert-reloader did not log the restart; its log %s:\n%s", reloader.LogPath, data)
	}
	if err := reloader.Stop(5 * time.Second); err != nil {
		t.Error(err)
	}
	if ledger, err := s.ledger(ctx, cluster); err != nil {
		t.Error(err)
	} else if _, ok := ledger[oldFP]; !ok {
		t.Errorf("the replaced certificate %s left the ledger before it expired: it could not be revoked", oldFP)
	}
}

// projectSecret writes data into dir the way the kubelet's atomic writer updates a secret
// volume: the files go into a new timestamped folder, the ..data symlink is swapped to it in
// one rename, and each key is a symlink through ..data.
func projectSecret(dir string, data map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ts, err := os.MkdirTemp(dir, ".."+time.Now().Format("2006_01_02_15_04_05."))
	if err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), v, 0o600); err != nil {
			return err
		}
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return err
	}
	oldTarget, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	if oldTarget != "" {
		_ = os.RemoveAll(filepath.Join(dir, oldTarget))
	}
	return nil
}

// ---- the stand-in agent and its supervisor ----

// standInEnv, set to a certificate path, makes the test binary act as the stand-in agent.
const standInEnv = "ARGOCD_AGENT_ADDON_E2E_STANDIN_CERT"

// runStandInAgent reads its certificate once, says which one, and runs until SIGTERM or
// SIGINT, like argocd-agent v0.9.0 (which has no certificate reload).
func runStandInAgent() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	path := os.Getenv(standInEnv)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Printf("stand-in agent pid %d: reading %s: %v\n", os.Getpid(), path, err)
		return 1
	}
	certs, err := pki.ParseCertificates(data)
	if err != nil || len(certs) == 0 {
		fmt.Printf("stand-in agent pid %d: parsing %s: %v\n", os.Getpid(), path, err)
		return 1
	}
	fmt.Printf("stand-in agent pid %d: loaded certificate %s CN=%s\n", os.Getpid(), pki.Fingerprint(certs[0]), certs[0].Subject.CommonName)
	sig := <-sigs
	fmt.Printf("stand-in agent pid %d: got %s, exiting\n", os.Getpid(), sig)
	return 0
}

// supervised runs the stand-in agent and restarts it whenever it exits, as the kubelet restarts
// a container of a pod with restartPolicy Always.
type supervised struct {
	mu      sync.Mutex
	loads   []string
	exited  []string
	cmd     *exec.Cmd
	stopped bool
	done    chan struct{}
	log     *os.File
}

func startSupervised(procName, certPath, logPath string) (*supervised, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	sv := &supervised{done: make(chan struct{}), log: logFile}
	start := func() (*exec.Cmd, io.ReadCloser, error) {
		// argv[0] is the process name the reloader looks for.
		cmd := &exec.Cmd{Path: self, Args: []string{procName}, Env: append(os.Environ(), standInEnv+"="+certPath)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		cmd.Stderr = logFile
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return cmd, out, nil
	}
	cmd, out, err := start()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		defer close(sv.done)
		defer logFile.Close()
		for {
			sv.mu.Lock()
			sv.cmd = cmd
			sv.mu.Unlock()
			sc := bufio.NewScanner(out)
			why := "no signal"
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(logFile, line)
				if _, rest, ok := strings.Cut(line, ": got "); ok {
					why, _, _ = strings.Cut(rest, ",")
				}
				if _, rest, ok := strings.Cut(line, "loaded certificate "); ok {
					fp, _, _ := strings.Cut(rest, " ")
					sv.mu.Lock()
					sv.loads = append(sv.loads, fp)
					sv.mu.Unlock()
				}
			}
			err := cmd.Wait()
			sv.mu.Lock()
			sv.exited = append(sv.exited, fmt.Sprintf("%s, then %v (wait error %v)", why, cmd.ProcessState, err))
			stopped := sv.stopped
			sv.mu.Unlock()
			if stopped {
				return
			}
			fmt.Fprintf(logFile, "stand-in kubelet: agent exited (%v); restarting it\n", cmd.ProcessState)
			time.Sleep(200 * time.Millisecond)
			if cmd, out, err = start(); err != nil {
				fmt.Fprintf(logFile, "stand-in kubelet: restarting: %v\n", err)
				return
			}
		}
	}()
	return sv, nil
}

func (sv *supervised) loaded() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]string(nil), sv.loads...)
}

// exits lists how each agent process ended: the signal it reported ("terminated" for
// SIGTERM) and its exit status.
func (sv *supervised) exits() []string {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return append([]string(nil), sv.exited...)
}

func (sv *supervised) stop() {
	sv.mu.Lock()
	sv.stopped = true
	cmd := sv.cmd
	sv.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-sv.done:
	case <-time.After(10 * time.Second):
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
	}
}
