package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestArgoCDPods runs Argo CD as pods from install.yaml: on cluster1 they sync the guestbook
// from the fleet's Git server until its pod runs; StartArgoCD on that install (Installed)
// changes a setting and restarts the application-controller; Stop takes the pods away, also
// after the fleet's Stop; the pull-model hub's applicationset-controller alone becomes ready.
func TestArgoCDPods(t *testing.T) {
	skipUnlessRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	f, repoURL := argoCDFleet(ctx, t)

	// Both start at once: most of the time goes into waiting for pods.
	var hubArgo *fleet.ArgoCD
	var hubErr error
	hubDone := make(chan struct{})
	go func() {
		defer close(hubDone)
		hubArgo, hubErr = f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ApplicationSetOnly: true})
	}()
	argo := syncGuestbook(ctx, t, f, repoURL, hubDone)
	installedSettingRestartsTheController(ctx, t, f)
	stopRemovesThePods(ctx, t, f, argo)

	<-hubDone
	if hubErr != nil {
		t.Fatal(hubErr)
	}
	err := f.HubClient().Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: fleet.ArgoCDRepoServer}, &appsv1.Deployment{})
	if err == nil {
		t.Errorf("hub: ApplicationSetOnly runs a repo-server")
	}
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := hubArgo.Stop(); err != nil {
		t.Errorf("Stop after the fleet's Stop: %v", err)
	}
}

// argoCDFleet starts a fleet of one cluster on real nodes with Argo CD's, Redis's and the
// hello image, and a Git server whose guestbook repository runs hello; it returns the fleet
// and the repository's URL.
func argoCDFleet(ctx context.Context, t *testing.T) (*fleet.Fleet, string) {
	t.Helper()
	tmp := t.TempDir()
	argoDir, _, err := fleet.ArgoCDBinaries()
	if err != nil {
		t.Fatal(err)
	}

	// The images build while the fleet starts (Argo CD's and Redis's are cached by content).
	var argoTar, redisTar, helloBin string
	var buildErr error
	var build sync.WaitGroup
	build.Add(1)
	go func() {
		defer build.Done()
		if argoTar, buildErr = node.BuildArgoCDImage(argoDir, tmp, "localhost/argocd:fleet"); buildErr != nil {
			return
		}
		if redisTar, buildErr = node.BuildRedisImage(tmp, "localhost/redis:fleet"); buildErr != nil {
			return
		}
		helloBin = filepath.Join(tmp, "hello")
		buildErr = node.BuildStatic(testenv.RepoRoot(), "./test/node/images/hello", helloBin)
	}()
	t.Cleanup(build.Wait)
	f := fleet.StartForTest(t, fleet.Options{Clusters: []string{"cluster1"}, BindingNamespace: "fleet-argocd", RealNodes: true})
	build.Wait()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if err := f.AddArgoCDImages(ctx, argoTar, redisTar); err != nil {
		t.Fatal(err)
	}
	hello := f.RegistryHost() + "/fleet-test/hello:1"
	helloTar := filepath.Join(tmp, "hello.tar")
	if err := node.WriteImage(helloTar, node.ImageSpec{Ref: hello, Binary: helloBin, UID: 65532}); err != nil {
		t.Fatal(err)
	}
	if err := f.AddImage(ctx, helloTar); err != nil {
		t.Fatal(err)
	}
	git, err := fleet.StartGitServerOn(filepath.Join(tmp, "git"), f.HostAddress())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = git.Close() })
	repo, err := git.CreateRepo(nodeapps.Guestbook)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Commit(nodeapps.GuestbookFiles(hello), "guestbook"); err != nil {
		t.Fatal(err)
	}
	return f, git.URL() + "/" + nodeapps.Guestbook + ".git"
}

// syncGuestbook starts Argo CD on cluster1 and has it sync the guestbook from repoURL until its
// pod runs. hubDone is waited for before the test fails, so that the hub's Argo CD start is not
// left behind.
func syncGuestbook(ctx context.Context, t *testing.T, f *fleet.Fleet, repoURL string, hubDone <-chan struct{}) *fleet.ArgoCD {
	t.Helper()
	start := time.Now()
	argo, err := f.StartArgoCD(ctx, "cluster1", fleet.ArgoCDOptions{ArgoCDCM: map[string]string{"timeout.reconciliation": "20s"}})
	if err != nil {
		<-hubDone
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = argo.Stop() })
	t.Logf("cluster1: Argo CD's pods ready in %s (repo-server %s, redis %s)", time.Since(start).Round(time.Second), argo.RepoServer, argo.Redis)

	c1, err := f.SpokeClient("cluster1")
	if err != nil {
		t.Fatal(err)
	}
	app := nodeapps.GuestbookApp(fleet.ArgoCDNamespace, repoURL)
	if err := c1.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, f, "cluster1: guestbook Synced and Healthy, its pod running", func() (bool, error) {
		st, err := fleet.GetApplicationState(ctx, c1, fleet.ArgoCDNamespace, nodeapps.Guestbook)
		if err != nil {
			return false, err
		}
		if st.Sync != "Synced" || st.Health != "Healthy" {
			return false, fmt.Errorf("%s", st)
		}
		return podsRunning(ctx, c1, nodeapps.Guestbook, map[string]string{"app": "guestbook"}) == 1, errors.New("no running guestbook pod")
	})
	t.Logf("cluster1: guestbook Synced and Healthy %s after Argo CD was started", time.Since(start).Round(time.Second))
	return argo
}

// installedSettingRestartsTheController: on what is installed, a new setting restarts the
// application-controller, and Stop deletes nothing.
func installedSettingRestartsTheController(ctx context.Context, t *testing.T, f *fleet.Fleet) {
	t.Helper()
	c1, err := f.SpokeClient("cluster1")
	if err != nil {
		t.Fatal(err)
	}
	before := controllerPodUID(ctx, t, c1)
	installed, err := f.StartArgoCD(ctx, "cluster1", fleet.ArgoCDOptions{Installed: true, ArgoCDCM: map[string]string{"timeout.reconciliation": "25s"}})
	if err != nil {
		t.Fatal(err)
	}
	if after := controllerPodUID(ctx, t, c1); after == before {
		t.Errorf("the application-controller's pod %s was not restarted for the new setting", before)
	}
	if err := installed.Stop(); err != nil {
		t.Fatal(err)
	}
	if podsRunning(ctx, c1, fleet.ArgoCDNamespace, nil) == 0 {
		t.Errorf("Stop of an Argo CD started with Installed removed its pods")
	}
}

// stopRemovesThePods: Stop takes Argo CD's pods away and keeps its settings; a second Stop
// is harmless.
func stopRemovesThePods(ctx context.Context, t *testing.T, f *fleet.Fleet, argo *fleet.ArgoCD) {
	t.Helper()
	c1, err := f.SpokeClient("cluster1")
	if err != nil {
		t.Fatal(err)
	}
	if err := argo.Stop(); err != nil {
		t.Fatal(err)
	}
	pods := &corev1.PodList{}
	if err := c1.List(ctx, pods, client.InNamespace(fleet.ArgoCDNamespace)); err != nil || len(pods.Items) > 0 {
		t.Errorf("pods left in %s after Stop: %d (%v)", fleet.ArgoCDNamespace, len(pods.Items), err)
	}
	if err := c1.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: "argocd-cm"}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("Stop took the settings too: %v", err)
	}
	if err := argo.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// podsRunning counts the running and ready pods of a namespace with those labels.
func podsRunning(ctx context.Context, c client.Client, namespace string, labels map[string]string) int {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if p.Status.Phase == corev1.PodRunning && cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

func controllerPodUID(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	p := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: fleet.ArgoCDApplicationController + "-0"}, p); err != nil {
		t.Fatal(err)
	}
	return string(p.UID)
}
