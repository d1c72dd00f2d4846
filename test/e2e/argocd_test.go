package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// Names of the Argo CD scenario.
const (
	argoCluster   = "cluster1"
	guestbookApp  = "guestbook"
	guestbookNS   = "guestbook"
	guestbookName = "guestbook-ui" // Deployment and Service
	// reconciliation is argocd-cm's timeout.reconciliation here: how long Argo CD may take to
	// notice a new commit without a webhook (Argo CD's default is 180s).
	reconciliation = 10 * time.Second
)

// testArgoCDApplication runs Argo CD's own application-controller and repo-server as pods on
// cluster1 (in the agent namespace argocd) and shows an Application reach the cluster with
// nothing written by hand: Argo CD clones a repository served on the machine, applies its
// Deployment and Service, and reports the Application Synced and Healthy once the guestbook's
// pod is ready; a second commit (two replicas, a new image) is picked up within
// timeout.reconciliation and synced the same way. Argo CD is stopped again before the agent scenarios.
func testArgoCDApplication(t *testing.T, s *suite) {
	spoke := s.spokes[argoCluster]
	ctx := ctxFor(t)

	repo, first := s.gitRepo(t, "git", "guestbook", fleet.GuestbookFiles(1, s.guestbookImg1))
	t.Logf("repository %s at %s", repo.URL, first)

	start := time.Now()
	argo, err := s.f.StartArgoCD(ctx, argoCluster, fleet.ArgoCDOptions{
		Namespace: agentNS,
		ArgoCDCM: map[string]string{
			"timeout.reconciliation":        reconciliation.String(),
			"timeout.reconciliation.jitter": "1s",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-72s %7s", argoCluster+": Argo CD up (CRDs, settings, repo-server, application-controller)", time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() {
		// Leave cluster1 as the agent scenarios expect it: no Application, no guestbook.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var errs []error
		errs = append(errs, client.IgnoreNotFound(spoke.Delete(ctx, fleet.NewApplication(guestbookApp, agentNS, repo.URL, "guestbook", guestbookNS))))
		errs = append(errs, argo.Stop())
		errs = append(errs, client.IgnoreNotFound(spoke.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: guestbookNS}})))
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up Argo CD: %v", err)
		}
	})

	app := fleet.NewApplication(guestbookApp, agentNS, repo.URL, "guestbook", guestbookNS)
	if err := spoke.Create(ctx, app); err != nil {
		t.Fatalf("creating the Application: %v", err)
	}

	// Argo CD applied the repository's objects: they carry its tracking annotation.
	s.eventually(t, argoCluster+": Argo CD created Deployment and Service "+guestbookNS+"/"+guestbookName, 3*time.Minute, func(ctx context.Context) (bool, string) {
		d, err := guestbookDeployment(ctx, spoke)
		if err != nil {
			return false, getState(err, "Deployment") + "; Application: " + appState(ctx, spoke)
		}
		if err := spoke.Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, &corev1.Service{}); err != nil {
			return false, getState(err, "Service")
		}
		return checkGuestbook(d, 1, s.guestbookImg1)
	})
	// Health comes from the Deployment's status: Healthy once its pod on the node is ready.
	s.waitApplication(t, "Synced and Healthy at the first commit, its pod ready", first, "Healthy")
	s.checkGuestbookAvailable(t, spoke, 1)

	second, err := repo.Commit(fleet.GuestbookFiles(2, s.guestbookImg2), "guestbook: two replicas, image 0.2")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second commit %s", second)
	s.eventually(t, argoCluster+": the second commit reached the Deployment (2 replicas, new image)", 3*reconciliation+time.Minute, func(ctx context.Context) (bool, string) {
		d, err := guestbookDeployment(ctx, spoke)
		if err != nil {
			return false, getState(err, "Deployment")
		}
		if done, state := checkGuestbook(d, 2, s.guestbookImg2); !done {
			return false, state + "; Application: " + appState(ctx, spoke)
		}
		return true, ""
	})
	s.waitApplication(t, "Synced and Healthy at the second commit, both pods of the new image ready", second, "Healthy")
	s.checkGuestbookAvailable(t, spoke, 2)
}

// checkGuestbookAvailable: Argo CD's Healthy is the Deployment's rollout on the node, every
// replica of its current spec available.
func (s *suite) checkGuestbookAvailable(t *testing.T, spoke client.Client, replicas int32) {
	t.Helper()
	d, err := guestbookDeployment(ctxFor(t), spoke)
	if err != nil {
		t.Fatal(err)
	}
	if st := d.Status; st.ObservedGeneration != d.Generation || st.UpdatedReplicas != replicas || st.AvailableReplicas != replicas {
		t.Errorf("guestbook Healthy in Argo CD, but its Deployment has %d updated and %d available replicas of %d (generation %d observed %d)",
			st.UpdatedReplicas, st.AvailableReplicas, replicas, d.Generation, st.ObservedGeneration)
	}
}

// testArgoCDApplicationSet runs Argo CD with its applicationset-controller on the hub, as the
// pull model has it there: an ApplicationSet with a list generator makes an Application, which
// the hub's application-controller syncs from the loopback repository onto the hub itself.
func testArgoCDApplicationSet(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	repo, sha := s.gitRepo(t, "git-hub", "guestbook", fleet.GuestbookFiles(1, s.guestbookImg1))

	start := time.Now()
	argo, err := s.f.StartArgoCD(ctx, "hub", fleet.ArgoCDOptions{ApplicationSetController: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%-72s %7s", "hub: Argo CD up (repo-server, application-controller, applicationset-controller)", time.Since(start).Round(10*time.Millisecond))
	const appNS = "guestbook-hub"
	appSet := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(fmt.Appendf(nil, `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata: {name: guestbook, namespace: %s}
spec:
  goTemplate: true
  generators:
  - list:
      elements:
      - {name: hub-guestbook, namespace: %s}
  template:
    metadata: {name: '{{.name}}'}
    spec:
      project: default
      source: {repoURL: %q, path: guestbook, targetRevision: main}
      destination: {server: https://kubernetes.default.svc, namespace: '{{.namespace}}'}
      syncPolicy:
        automated: {prune: true}
        syncOptions: [CreateNamespace=true]
`, fleet.ArgoCDNamespace, appNS, repo.URL), &appSet.Object); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errs := []error{client.IgnoreNotFound(s.hub.Delete(ctx, appSet))}
		// Without a resources finalizer the ApplicationSet's deletion takes its Application
		// but leaves the synced objects, which go with their namespace.
		errs = append(errs, argo.Stop())
		errs = append(errs, client.IgnoreNotFound(s.hub.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})))
		if err := errors.Join(errs...); err != nil {
			t.Errorf("cleaning up Argo CD on the hub: %v", err)
		}
	})
	if err := s.hub.Create(ctx, appSet); err != nil {
		t.Fatalf("creating the ApplicationSet: %v", err)
	}
	s.eventually(t, "hub: the applicationset-controller generated Application hub-guestbook", 2*time.Minute, func(ctx context.Context) (bool, string) {
		app := &unstructured.Unstructured{}
		app.SetGroupVersionKind(fleet.ApplicationGVK)
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: fleet.ArgoCDNamespace, Name: "hub-guestbook"}, app); err != nil {
			return false, getState(err, "Application")
		}
		for _, o := range app.GetOwnerReferences() {
			if o.Kind == "ApplicationSet" && o.Name == "guestbook" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("Application owners: %v", app.GetOwnerReferences())
	})
	s.eventually(t, "hub: Application hub-guestbook Synced at the commit, Deployment on the hub", 3*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, s.hub, fleet.ArgoCDNamespace, "hub-guestbook")
		if err != nil {
			return false, getState(err, "Application")
		}
		d := &appsv1.Deployment{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: appNS, Name: guestbookName}, d); err != nil {
			return false, getState(err, "Deployment") + "; Application: " + st.String()
		}
		return st.Sync == "Synced" && st.Revision == sha, st.String()
	})
}

func guestbookDeployment(ctx context.Context, c client.Client) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, client.ObjectKey{Namespace: guestbookNS, Name: guestbookName}, d)
	return d, err
}

// checkGuestbook compares the Deployment with what the repository says, and checks that Argo
// CD (not someone else) applied it.
func checkGuestbook(d *appsv1.Deployment, replicas int32, image string) (bool, string) {
	got := int32(1)
	if d.Spec.Replicas != nil {
		got = *d.Spec.Replicas
	}
	img := containerImage(d, guestbookName)
	tracking := d.Annotations["argocd.argoproj.io/tracking-id"]
	state := fmt.Sprintf("Deployment replicas=%d image=%s tracking-id=%q", got, img, tracking)
	return got == replicas && img == image && tracking != "", state
}

func appState(ctx context.Context, c client.Client) string {
	st, err := fleet.GetApplicationState(ctx, c, agentNS, guestbookApp)
	if err != nil {
		return err.Error()
	}
	return st.String()
}

// waitApplication waits until the Application is Synced at revision with the given health.
func (s *suite) waitApplication(t *testing.T, what, revision, health string) {
	t.Helper()
	s.eventually(t, argoCluster+": Application "+what, 3*time.Minute, func(ctx context.Context) (bool, string) {
		st, err := fleet.GetApplicationState(ctx, s.spokes[argoCluster], agentNS, guestbookApp)
		if apierrors.IsNotFound(err) || err != nil {
			return false, getState(err, "Application")
		}
		return st.Sync == "Synced" && st.Revision == revision && st.Health == health, st.String()
	})
}
