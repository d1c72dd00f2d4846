package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/spoke"
)

// Argo CD as pods
//
// On a fleet with real nodes StartArgoCD applies the pinned release's install.yaml to the
// namespace as a user with an image mirror does: the ConfigMaps (with the options' additions),
// Secrets, ServiceAccounts and RBAC (install in argocd.go), every Service and NetworkPolicy, and
// the Deployments and the StatefulSet of the components asked for, every image behind the
// fleet's registry (spoke.RewriteRegistry; AddArgoCDImages puts them there). The kubelet runs
// them; nothing is simulated, and the components reach the API server and each other as in any
// cluster. The only addition to the manifests is a pod-template annotation with a digest of the
// options' settings, so a later StartArgoCD with other settings rolls the pods that read them
// at start.

// configAnnotation carries the digest of the settings StartArgoCD wrote on the pod templates.
const configAnnotation = "fleet.argocd-agent-addon.io/argocd-config"

// argoPods is the pods' side of an ArgoCD.
type argoPods struct {
	f                  *Fleet
	c                  client.Client
	cluster, namespace string
	// created are the workloads StartArgoCD created, which stop deletes; waited are those it
	// waits for (with Installed, the installed ones).
	created, waited []client.Object
	// selectors are the pod labels of each workload, by name.
	selectors map[string]map[string]string
	// restarted are pods deleted for a restart: a workload is ready once none of them is left.
	restarted map[types.UID]bool
	// fleetStopped: the nodes and API servers are gone, and their pods with them.
	fleetStopped atomic.Bool
}

// argoPodWorkloads are the workloads of install.yaml that run the components opts asks for:
// argocd-server whenever StartArgoCD installs (it creates the "default" AppProject and
// argocd-secret's server.secretkey), with argocd-redis, which it needs.
func argoPodWorkloads(opts ArgoCDOptions) []string {
	var names []string
	if !opts.Installed {
		names = append(names, ArgoCDServer)
	}
	if !opts.Installed || !opts.ApplicationSetOnly {
		names = append(names, argoCDRedis)
	}
	if !opts.ApplicationSetOnly {
		names = append(names, ArgoCDRepoServer, ArgoCDApplicationController)
	}
	if opts.ApplicationSetController || opts.ApplicationSetOnly {
		names = append(names, ArgoCDApplicationSetController)
	}
	return names
}

// startArgoCDPods runs Argo CD as pods.
func (f *Fleet) startArgoCDPods(ctx context.Context, cp *controlPlane, c client.Client, m *argoManifest, opts ArgoCDOptions) (*ArgoCD, error) {
	if opts.Installed && len(opts.CmdParams) > 0 {
		return nil, errors.New("with ArgoCDOptions.Installed, StartArgoCD writes argocd-cm only: CmdParams need an install")
	}
	p := &argoPods{f: f, c: c, cluster: cp.name, namespace: opts.Namespace, selectors: map[string]map[string]string{}, restarted: map[types.UID]bool{}}
	a := &ArgoCD{Cluster: cp.name, Namespace: opts.Namespace, pods: p}
	f.OnStop(func() error { p.fleetStopped.Store(true); return nil })
	fail := func(err error) (*ArgoCD, error) { return nil, errors.Join(err, a.Stop()) }

	names := argoPodWorkloads(opts)
	for _, n := range names {
		w := m.workloads[n]
		labels, _, _ := unstructured.NestedStringMap(w.Object, "spec", "selector", "matchLabels")
		p.selectors[n] = labels
		p.waited = append(p.waited, workloadShell(w.GetKind(), opts.Namespace, n))
	}
	if opts.Installed {
		if err := p.configureInstalled(ctx, opts.ArgoCDCM); err != nil {
			return nil, err
		}
	} else {
		if err := a.install(ctx, c, m, opts.ArgoCDCM, opts.CmdParams); err != nil {
			return fail(err)
		}
		var objs []*unstructured.Unstructured
		for _, s := range m.services {
			s := s.DeepCopy()
			s.SetNamespace(opts.Namespace)
			objs = append(objs, s)
		}
		digest := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprint(opts.ArgoCDCM, opts.CmdParams))))[:16]
		for _, n := range names {
			w := m.workloads[n].DeepCopy()
			w.SetNamespace(opts.Namespace)
			rewriteImages(w, f.RegistryHost())
			_ = unstructured.SetNestedField(w.Object, digest, "spec", "template", "metadata", "annotations", configAnnotation)
			objs = append(objs, w)
		}
		// Created before they are applied: a failed apply still leaves nothing behind.
		p.created = p.waited
		if err := applyObjects(ctx, c, objs, nil); err != nil {
			return fail(fmt.Errorf("%s: Argo CD: %w", cp.name, err))
		}
	}
	if err := p.waitReady(ctx, opts.StartTimeout); err != nil {
		if opts.Installed {
			return nil, err
		}
		return fail(err)
	}
	if slices.Contains(names, ArgoCDRepoServer) {
		a.RepoServer = fmt.Sprintf("%s.%s.svc:8081", ArgoCDRepoServer, opts.Namespace)
	}
	if slices.Contains(names, argoCDRedis) {
		a.Redis = fmt.Sprintf("%s.%s.svc:6379", argoCDRedis, opts.Namespace)
	}
	f.logf("%s: Argo CD pods ready in namespace %s: %s", cp.name, opts.Namespace, strings.Join(names, ", "))
	return a, nil
}

// workloadShell is an empty typed Deployment or StatefulSet to read a workload into.
func workloadShell(kind, namespace, name string) client.Object {
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	if kind == "StatefulSet" {
		return &appsv1.StatefulSet{ObjectMeta: meta}
	}
	return &appsv1.Deployment{ObjectMeta: meta}
}

// rewriteImages puts every image of a workload's pod behind the registry reg.
func rewriteImages(w *unstructured.Unstructured, reg string) {
	for _, field := range []string{"initContainers", "containers"} {
		ctrs, found, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", field)
		if !found {
			continue
		}
		for _, ctr := range ctrs {
			m := ctr.(map[string]any)
			m["image"] = spoke.RewriteRegistry(m["image"].(string), reg)
		}
		_ = unstructured.SetNestedSlice(w.Object, ctrs, "spec", "template", "spec", field)
	}
}

// configureInstalled adds argoCDCM to the installed argocd-cm and, when that changed it,
// restarts the application-controller's pods, which read their settings at start, as `kubectl
// rollout restart` would. The pods are deleted rather than the template annotated: the
// installer (the components addon's ManifestWork) owns the StatefulSet.
func (p *argoPods) configureInstalled(ctx context.Context, argoCDCM map[string]string) error {
	if len(argoCDCM) == 0 {
		return nil
	}
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := p.c.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: "argocd-cm"}, cm); err != nil {
			return err
		}
		changed = false
		for k, v := range argoCDCM {
			if cm.Data[k] != v {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[k], changed = v, true
			}
		}
		if !changed {
			return nil
		}
		return p.c.Update(ctx, cm)
	})
	if err != nil {
		return fmt.Errorf("%s: the installed argocd-cm: %w", p.cluster, err)
	}
	if !changed {
		return nil
	}
	pods := &corev1.PodList{}
	if err := p.c.List(ctx, pods, client.InNamespace(p.namespace), client.MatchingLabels(p.selectors[ArgoCDApplicationController])); err != nil {
		return err
	}
	for i := range pods.Items {
		if err := client.IgnoreNotFound(p.c.Delete(ctx, &pods.Items[i])); err != nil {
			return fmt.Errorf("%s: restarting %s: %w", p.cluster, pods.Items[i].Name, err)
		}
		p.restarted[pods.Items[i].UID] = true
	}
	return nil
}

// waitReady waits until every workload in p.waited has rolled out (WorkloadReady) and no pod
// deleted for a restart is left; on timeout the error describes the namespace's pods.
func (p *argoPods) waitReady(ctx context.Context, timeout time.Duration) error {
	var pending []string
	err := p.f.poll(ctx, p.cluster+": Argo CD's pods ready", timeout, func(ctx context.Context) (bool, error) {
		pending = pending[:0]
		for _, w := range p.waited {
			ready := WorkloadReady
			if w.GetName() == ArgoCDServer {
				ready = p.serverStarted
			}
			if ok, state := ready(ctx, p.c, w); !ok {
				pending = append(pending, fmt.Sprintf("%s: %s", w.GetName(), state))
			}
		}
		if len(p.restarted) > 0 {
			pods := &corev1.PodList{}
			if err := p.c.List(ctx, pods, client.InNamespace(p.namespace)); err != nil {
				return false, err
			}
			for _, pod := range pods.Items {
				if p.restarted[pod.UID] {
					pending = append(pending, "pod "+pod.Name+" not yet replaced")
				}
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return fmt.Errorf("%w: %s; pods in %s: %s", err, strings.Join(pending, "; "), p.namespace, podStates(sctx, p.c, p.namespace))
	}
	return nil
}

// serverStarted reports whether argocd-server has done what the fleet runs it for: its pod
// runs, the "default" AppProject exists and argocd-secret holds server.secretkey (both written
// by the server at start). Nothing in the fleet talks to argocd-server, and its readiness probe
// (install.yaml: first 3 s after start, then every 30 s) misses a server still starting on a
// busy machine, which alone would add half a minute to every install; the other workloads are
// waited for until ready.
func (p *argoPods) serverStarted(ctx context.Context, c client.Client, w client.Object) (bool, string) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		return false, err.Error()
	}
	dep := w.(*appsv1.Deployment)
	if dep.Status.ObservedGeneration != dep.Generation || dep.Status.UpdatedReplicas != dep.Status.Replicas {
		return false, fmt.Sprintf("rolling out: replicas %d, updated %d", dep.Status.Replicas, dep.Status.UpdatedReplicas)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(p.namespace), client.MatchingLabels(p.selectors[ArgoCDServer])); err != nil {
		return false, err.Error()
	}
	if !slices.ContainsFunc(pods.Items, p.serverRuns) {
		return false, "no pod running"
	}
	project := &unstructured.Unstructured{}
	project.SetGroupVersionKind(appProjectGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: "default"}, project); err != nil {
		return false, "the default AppProject: " + err.Error()
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.namespace, Name: "argocd-secret"}, secret); err != nil {
		return false, "argocd-secret: " + err.Error()
	}
	if len(secret.Data["server.secretkey"]) == 0 {
		return false, "argocd-secret has no server.secretkey yet"
	}
	return true, ""
}

// serverRuns: pod is a current argocd-server pod whose container runs.
func (p *argoPods) serverRuns(pod corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && !p.restarted[pod.UID] &&
		slices.ContainsFunc(pod.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.State.Running != nil })
}

// stop deletes the workloads StartArgoCD created and waits until their pods are gone. The
// ConfigMaps, Secrets, RBAC and Services stay, so a later StartArgoCD in the namespace works.
func (p *argoPods) stop() error {
	if len(p.created) == 0 || p.fleetStopped.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	for _, w := range p.created {
		if err := p.c.Delete(ctx, w, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("%s: deleting %s: %w", p.cluster, w.GetName(), err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var left []string
	err := p.f.poll(ctx, p.cluster+": Argo CD's pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for _, w := range p.created {
			pods := &corev1.PodList{}
			if err := p.c.List(ctx, pods, client.InNamespace(p.namespace), client.MatchingLabels(p.selectors[w.GetName()])); err != nil {
				return false, err
			}
			for _, pod := range pods.Items {
				left = append(left, pod.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %v", err, left)
	}
	return nil
}

// WorkloadReady reports whether a Deployment or StatefulSet has rolled out, as `kubectl rollout
// status` decides: the controller saw the current spec, and every replica runs it and is
// available (a pod of the previous spec that is still ready does not count). The string says
// where it stands.
func WorkloadReady(ctx context.Context, c client.Client, w client.Object) (bool, string) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		return false, err.Error()
	}
	switch w := w.(type) {
	case *appsv1.Deployment:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		st := w.Status
		return st.ObservedGeneration == w.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want,
			fmt.Sprintf("replicas %d, updated %d, available %d of %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, want)
	case *appsv1.StatefulSet:
		want := int32(1)
		if w.Spec.Replicas != nil {
			want = *w.Spec.Replicas
		}
		st := w.Status
		return st.ObservedGeneration == w.Generation && st.UpdateRevision == st.CurrentRevision && st.UpdatedReplicas == want && st.ReadyReplicas == want,
			fmt.Sprintf("revision %s of %s, updated %d, ready %d of %d", st.CurrentRevision, st.UpdateRevision, st.UpdatedReplicas, st.ReadyReplicas, want)
	}
	return false, fmt.Sprintf("unknown workload %T", w)
}

// AddArgoCDImages adds the images that the workloads of the pinned install.yaml name, as
// StartArgoCD runs them behind the fleet's registry, from two tarballs: Argo CD's (built from
// the pinned binary, node.BuildArgoCDImage) for the argocd images, and Redis's
// (node.BuildRedisImage) for the redis one. Their tags are install.yaml's, which may differ
// from those of the components addon's manifests (spoke.UpstreamImages).
func (f *Fleet) AddArgoCDImages(ctx context.Context, argoCDTar, redisTar string) error {
	argoCDRefs, redisRefs, err := ArgoCDInstallImages(f.RegistryHost())
	if err != nil {
		return err
	}
	if err := f.AddImageAs(ctx, argoCDTar, argoCDRefs...); err != nil {
		return err
	}
	return f.AddImageAs(ctx, redisTar, redisRefs...)
}

// ArgoCDInstallImages are the images the workloads of the pinned install.yaml name once behind
// the registry reg, Argo CD's and Redis's apart.
func ArgoCDInstallImages(reg string) (argoCD, redis []string, _ error) {
	bin, _, err := ArgoCDBinaries()
	if err != nil {
		return nil, nil, err
	}
	m, err := readArgoManifest(filepath.Join(bin, "install.yaml"))
	if err != nil {
		return nil, nil, err
	}
	for _, ref := range m.images(reg) {
		r, err := name.ParseReference(ref, name.Insecure)
		if err != nil {
			return nil, nil, err
		}
		switch path.Base(r.Context().RepositoryStr()) {
		case "argocd":
			argoCD = append(argoCD, ref)
		case "redis":
			redis = append(redis, ref)
		default:
			return nil, nil, fmt.Errorf("install.yaml names image %s, which is neither Argo CD's nor Redis's", ref)
		}
	}
	return argoCD, redis, nil
}

// images are the images of the workloads StartArgoCD may run, behind the registry reg.
func (m *argoManifest) images(reg string) []string {
	var out []string
	for _, n := range append([]string{argoCDRedis}, argoComponents...) {
		w := m.workloads[n].DeepCopy()
		rewriteImages(w, reg)
		for _, field := range []string{"initContainers", "containers"} {
			ctrs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", field)
			for _, ctr := range ctrs {
				if img := ctr.(map[string]any)["image"].(string); !slices.Contains(out, img) {
					out = append(out, img)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
