package fleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Argo CD in the fleet
//
// StartArgoCD runs Argo CD's own controllers, built by hack/argocd-binaries.sh from the pinned
// release, as fleet processes against one cluster's API server, the way Argo CD's install
// manifest (install.yaml of the same release) runs them in pods:
//
//   - the CRDs (Application, AppProject, ApplicationSet) and, in the Argo CD namespace, every
//     ConfigMap and Secret of install.yaml (argocd-cm, argocd-cmd-params-cm, argocd-rbac-cm,
//     argocd-secret, ...), plus what a running argocd-server would add: server.secretkey in
//     argocd-secret and the "default" AppProject;
//   - each component's environment resolved from those ConfigMaps exactly as the manifest's
//     configMapKeyRef entries say, so a setting goes where a user would put it (for example
//     timeout.reconciliation in argocd-cm) and takes effect on the next start, as with a pod;
//   - argocd-repo-server, argocd-application-controller and optionally
//     argocd-applicationset-controller, each on free loopback ports.
//
// Differences from a cluster install, each because there is no pod: the controllers reach the
// API server through a kubeconfig (ARGOCD_FAKE_IN_CLUSTER, Argo CD's switch for running outside
// a pod, makes the in-cluster destination https://kubernetes.default.svc use it too), with a
// client certificate bound to cluster-admin where the install binds a ServiceAccount to a
// ClusterRole of the same breadth; GnuPG commit verification is off (ARGOCD_GPG_ENABLED=false:
// it needs a gpg binary and the keyring the pod mounts); no argocd-server, Dex or notifications
// controller runs. Redis is in-process, see argoRedis.

// ArgoCDNamespace is the default namespace of an Argo CD started with StartArgoCD.
const ArgoCDNamespace = "argocd"

// Names of the Argo CD components (also their binaries' names and their workloads' names in
// install.yaml).
const (
	ArgoCDApplicationController    = "argocd-application-controller"
	ArgoCDRepoServer               = "argocd-repo-server"
	ArgoCDApplicationSetController = "argocd-applicationset-controller"
)

var (
	argoBinOnce sync.Once
	argoBinDir  string
	argoBinErr  error
	argoBinTime time.Duration
)

// ArgoCDBinaries returns the folder hack/argocd-binaries.sh prints (it honours
// ARGOCD_BINARIES_DIR): the argocd binary, a link per component, crds/ and install.yaml. It
// builds Argo CD on first use (minutes) and reports how long the script took.
func ArgoCDBinaries() (string, time.Duration, error) {
	argoBinOnce.Do(func() {
		start := time.Now()
		argoBinDir, argoBinErr = runScript("argocd-binaries.sh")
		argoBinTime = time.Since(start)
	})
	return argoBinDir, argoBinTime, argoBinErr
}

// ArgoCDOptions configure StartArgoCD. Zero values get the defaults noted on each field.
type ArgoCDOptions struct {
	// Namespace is Argo CD's namespace. Default: argocd.
	Namespace string
	// BinDir holds the binaries, crds/ and install.yaml. Default: ArgoCDBinaries().
	BinDir string
	// ApplicationSetController also runs argocd-applicationset-controller.
	ApplicationSetController bool
	// ApplicationSetOnly runs argocd-applicationset-controller alone, as a pull-model hub
	// needs: its Applications carry skip-reconcile, so no application-controller (and no
	// repo-server for it) would act on them.
	ApplicationSetOnly bool
	// ArgoCDCM and CmdParams are added to argocd-cm and argocd-cmd-params-cm over install.yaml's
	// data, e.g. {"timeout.reconciliation": "15s"}. The keys that wire components to each other
	// (repo.server, redis.server, listen addresses) are the harness's.
	ArgoCDCM  map[string]string
	CmdParams map[string]string
	// StartTimeout bounds the wait for each component to report healthy. Default: 3 minutes.
	StartTimeout time.Duration
	// InstalledCRDs uses the Argo CD CRDs already on the cluster (put there by the addon, say)
	// instead of installing those of BinDir.
	InstalledCRDs bool
	// InstalledRedisPassword runs Redis with the password in the cluster's Secret argocd-redis
	// (key auth), which must exist, instead of writing a new one there.
	InstalledRedisPassword bool
	// Plugins are Config Management Plugins, each a folder holding a plugin.yaml: each runs as
	// argocd-cmp-server, the repo-server's sidecar in a pod, on a Unix socket in a folder the
	// repo-server is pointed at (ARGOCD_PLUGINSOCKFILEPATH, as the shared plugins volume).
	Plugins []string
}

// ArgoCD is Argo CD running against one cluster of the fleet.
type ArgoCD struct {
	// Cluster is "hub" or a managed cluster's name; Namespace is Argo CD's namespace there.
	Cluster   string
	Namespace string
	// RepoServer and Redis are the loopback addresses the components use.
	RepoServer string
	Redis      string
	// Processes are the components, in start order.
	Processes []*Process

	redis           *argoRedis
	keepRedisSecret bool
	stopOnce        sync.Once
	stopErr         error
}

// StartArgoCD installs and starts Argo CD on cluster ("hub" or a managed cluster) and returns
// once every component reports healthy. The fleet's Stop ends it too; ArgoCD.Stop ends it
// earlier.
func (f *Fleet) StartArgoCD(ctx context.Context, cluster string, opts ArgoCDOptions) (*ArgoCD, error) {
	cp, err := f.plane(cluster)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = ArgoCDNamespace
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.BinDir == "" {
		if opts.BinDir, _, err = ArgoCDBinaries(); err != nil {
			return nil, err
		}
	}
	manifest, err := readArgoManifest(filepath.Join(opts.BinDir, "install.yaml"))
	if err != nil {
		return nil, err
	}
	c, err := client.New(cp.adminConfig, client.Options{Scheme: f.scheme})
	if err != nil {
		return nil, err
	}
	if !opts.InstalledCRDs {
		if err := f.installCRDs(ctx, cp, []string{filepath.Join(opts.BinDir, "crds")}); err != nil {
			return nil, err
		}
	}
	if err := ensureNamespaces(ctx, c, opts.Namespace); err != nil {
		return nil, err
	}

	a := &ArgoCD{Cluster: cluster, Namespace: opts.Namespace, keepRedisSecret: opts.InstalledRedisPassword}
	redisPassword, err := randomKey()
	if err != nil {
		return nil, err
	}
	if opts.InstalledRedisPassword {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: "argocd-redis"}, s); err != nil {
			return nil, fmt.Errorf("%s: reading the Redis password: %w", cluster, err)
		}
		if redisPassword = string(s.Data["auth"]); redisPassword == "" {
			return nil, fmt.Errorf("%s: Secret %s/argocd-redis has no auth key", cluster, opts.Namespace)
		}
	}
	if a.redis, err = startArgoRedis(redisPassword); err != nil {
		return nil, err
	}
	f.OnStop(a.closeRedis)
	a.Redis = a.redis.addr
	fail := func(err error) (*ArgoCD, error) { return nil, errors.Join(err, a.Stop()) }

	var p [6]int
	for i := range p {
		if p[i], err = f.ports.next(); err != nil {
			return fail(err)
		}
	}
	repoPort, repoMetrics, ctrlMetrics, appsetMetrics, appsetProbe, appsetWebhook := p[0], p[1], p[2], p[3], p[4], p[5]
	a.RepoServer = "127.0.0.1:" + strconv.Itoa(repoPort)

	cmdParams := map[string]string{}
	for k, v := range opts.CmdParams {
		cmdParams[k] = v
	}
	cmdParams["repo.server"] = a.RepoServer
	cmdParams["redis.server"] = a.Redis
	cmdParams["reposerver.listen.address"] = "127.0.0.1"
	if err := a.applySettings(ctx, c, manifest, opts.ArgoCDCM, cmdParams, redisPassword); err != nil {
		return fail(err)
	}
	identity, err := a.controllerIdentity(ctx, c, cp)
	if err != nil {
		return fail(err)
	}

	dir := filepath.Join(cp.dir, "argocd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	type component struct {
		name   string
		args   []string
		health string // URL that answers 200 once the component is up
	}
	specs := []component{
		{ArgoCDRepoServer, []string{
			"--port=" + strconv.Itoa(repoPort),
			"--metrics-address=127.0.0.1", "--metrics-port=" + strconv.Itoa(repoMetrics),
		}, fmt.Sprintf("http://127.0.0.1:%d/healthz?full=true", repoMetrics)},
		// Its metrics server binds all interfaces (Argo CD has no flag for the address).
		{ArgoCDApplicationController, []string{
			"--kubeconfig=" + identity, "--namespace=" + a.Namespace,
			"--metrics-port=" + strconv.Itoa(ctrlMetrics),
		}, fmt.Sprintf("http://127.0.0.1:%d/healthz", ctrlMetrics)},
	}
	if opts.ApplicationSetOnly {
		specs = nil
	}
	if opts.ApplicationSetController || opts.ApplicationSetOnly {
		specs = append(specs, component{ArgoCDApplicationSetController, []string{
			"--kubeconfig=" + identity, "--namespace=" + a.Namespace,
			"--metrics-addr=127.0.0.1:" + strconv.Itoa(appsetMetrics),
			"--probe-addr=127.0.0.1:" + strconv.Itoa(appsetProbe),
			"--webhook-addr=127.0.0.1:" + strconv.Itoa(appsetWebhook),
			// Its probe server registers no check; the metrics server answers once the
			// controller manager runs.
		}, fmt.Sprintf("http://127.0.0.1:%d/metrics", appsetMetrics)})
	}
	pluginSocks, err := f.startPlugins(ctx, a, cluster, dir, opts)
	if err != nil {
		return fail(err)
	}
	for _, s := range specs {
		env, err := manifest.env(ctx, c, s.name, a.Namespace, map[string]map[string]string{"argocd-cm": opts.ArgoCDCM, "argocd-cmd-params-cm": cmdParams})
		if err != nil {
			return fail(err)
		}
		home := filepath.Join(dir, s.name)
		if err := os.MkdirAll(home, 0o755); err != nil {
			return fail(err)
		}
		sock, err := f.shortSocketPath(home, "askpass.sock")
		if err != nil {
			return fail(err)
		}
		env = append(env,
			"HOME="+home,
			// Where the pod mounts its configuration (TLS, GnuPG, SSH known hosts): nothing
			// is mounted here, so a component finds none and uses its defaults.
			"ARGOCD_APP_CONF_PATH="+filepath.Join(home, "app-config"),
			"ARGOCD_GPG_ENABLED=false",
			"ARGOCD_ASK_PASS_SOCK="+sock,
			"KUBECACHEDIR="+filepath.Join(home, "kubecache"),
			"HELM_CACHE_HOME="+filepath.Join(home, "helm"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "helm"),
			"HELM_DATA_HOME="+filepath.Join(home, "helm"),
			"ARGOCD_FAKE_IN_CLUSTER=true",
			"KUBECONFIG="+identity,
			// The repo-server runs git-verify-wrapper.sh from $PATH for every manifest
			// generation; the image has it in /usr/local/bin.
			"PATH="+opts.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		)
		if s.name == ArgoCDRepoServer && pluginSocks != "" {
			env = append(env, "ARGOCD_PLUGINSOCKFILEPATH="+pluginSocks)
		}
		proc, err := f.StartProcess(ProcessSpec{
			Name: cluster + "-" + s.name,
			Path: filepath.Join(opts.BinDir, s.name),
			Args: s.args,
			Env:  env,
			Dir:  home,
		})
		if err != nil {
			return fail(err)
		}
		a.Processes = append(a.Processes, proc)
		if err := f.poll(ctx, cluster+" "+s.name, opts.StartTimeout, func(ctx context.Context) (bool, error) {
			if done, err := proc.Exited(); done {
				return false, fmt.Errorf("%s exited: %v; last log lines:\n%s", proc.Name, err, tail(proc.LogPath, 25))
			}
			_, err := httpGet(ctx, s.health, false)
			return err == nil, err
		}); err != nil {
			return fail(err)
		}
	}
	f.logf("%s: Argo CD up in namespace %s (repo-server %s, redis %s)", cluster, a.Namespace, a.RepoServer, a.Redis)
	return a, nil
}

// startPlugins runs opts.Plugins and returns the folder of their sockets ("" without plugins).
func (f *Fleet) startPlugins(ctx context.Context, a *ArgoCD, cluster, dir string, opts ArgoCDOptions) (string, error) {
	if len(opts.Plugins) == 0 {
		return "", nil
	}
	// A short folder: a socket path may not exceed 108 bytes.
	socks, err := os.MkdirTemp("", "fleet-cmp-")
	if err != nil {
		return "", err
	}
	f.OnStop(func() error { return os.RemoveAll(socks) })
	for i, cfg := range opts.Plugins {
		home := filepath.Join(dir, fmt.Sprintf("argocd-cmp-server-%d", i))
		if err := os.MkdirAll(home, 0o755); err != nil {
			return "", err
		}
		proc, err := f.StartProcess(ProcessSpec{
			Name: fmt.Sprintf("%s-argocd-cmp-server-%d", cluster, i),
			Path: filepath.Join(opts.BinDir, "argocd"),
			Args: []string{"--config-dir-path=" + cfg, "--logformat=text"},
			Env: []string{"ARGOCD_BINARY_NAME=argocd-cmp-server", "ARGOCD_PLUGINSOCKFILEPATH=" + socks,
				"ARGOCD_CMP_WORKDIR=" + home, "HOME=" + home},
			Dir: home,
		})
		if err != nil {
			return "", err
		}
		a.Processes = append(a.Processes, proc)
		want := i + 1
		if err := f.poll(ctx, cluster+" argocd-cmp-server", opts.StartTimeout, func(context.Context) (bool, error) {
			if done, err := proc.Exited(); done {
				return false, fmt.Errorf("%s exited: %v; last log lines:\n%s", proc.Name, err, tail(proc.LogPath, 25))
			}
			found, err := filepath.Glob(filepath.Join(socks, "*.sock"))
			return len(found) >= want, err
		}); err != nil {
			return "", err
		}
	}
	return socks, nil
}

// Stop ends the Argo CD components and their Redis. Safe to call more than once, and after
// the fleet's Stop.
func (a *ArgoCD) Stop() error {
	a.stopOnce.Do(func() {
		var errs []error
		for i := len(a.Processes) - 1; i >= 0; i-- {
			errs = append(errs, a.Processes[i].Stop(15*time.Second))
		}
		errs = append(errs, a.closeRedis())
		a.stopErr = errors.Join(errs...)
	})
	return a.stopErr
}

func (a *ArgoCD) closeRedis() error {
	if a.redis != nil {
		a.redis.close()
	}
	return nil
}

// applySettings writes install.yaml's ConfigMaps and Secrets into the namespace, with the
// given additions to argocd-cm and argocd-cmd-params-cm, a server.secretkey in argocd-secret,
// and the Redis password in Secret argocd-redis (which the install's redis-initial-password
// init container creates). An existing object's data is replaced, so a second StartArgoCD on
// the same cluster configures it afresh.
func (a *ArgoCD) applySettings(ctx context.Context, c client.Client, m *argoManifest, argoCDCM, cmdParams map[string]string, redisPassword string) error {
	for _, cm := range m.configMaps {
		cm := cm.DeepCopy()
		cm.Namespace = a.Namespace
		add := map[string]string{}
		switch cm.Name {
		case "argocd-cm":
			add = argoCDCM
		case "argocd-cmd-params-cm":
			add = cmdParams
		}
		for k, v := range add {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[k] = v
		}
		if err := createOrReplace(ctx, c, cm, func(have client.Object) { have.(*corev1.ConfigMap).Data = cm.Data }); err != nil {
			return err
		}
	}
	redisSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-redis", Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}},
		Data:       map[string][]byte{"auth": []byte(redisPassword)},
	}
	secrets := m.secrets
	if !a.keepRedisSecret {
		secrets = append(secrets, redisSecret)
	}
	for _, s := range secrets {
		s := s.DeepCopy()
		s.Namespace = a.Namespace
		if s.Name == "argocd-secret" {
			// argocd-server generates this on its first start; the controllers read settings
			// through the same manager, which reports settings without it as incomplete.
			key, err := randomKey()
			if err != nil {
				return err
			}
			s.Data = map[string][]byte{"server.secretkey": []byte(key)}
		}
		if err := createOrReplace(ctx, c, s, func(have client.Object) { have.(*corev1.Secret).Data = s.Data }); err != nil {
			return err
		}
	}
	// The "default" AppProject, which argocd-server also creates at start-up: Applications
	// name it unless they name another project.
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": a.Namespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	// Right after its CRD is established, the API server's discovery may not list the kind yet
	// (seen once in a run): retry while the kind is unknown.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, project)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return fmt.Errorf("%s: creating AppProject default: %w", a.Cluster, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func randomKey() (string, error) {
	key := make([]byte, 32)
	if _, err := io.ReadFull(rand.Reader, key); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(key), nil
}

func createOrReplace(ctx context.Context, c client.Client, obj client.Object, update func(have client.Object)) error {
	err := c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := obj.DeepCopyObject().(client.Object)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return err
	}
	update(have)
	return c.Update(ctx, have)
}

// controllerIdentity writes a kubeconfig for the controllers (user argocd-controllers, a client
// certificate of the cluster CA) and binds it to cluster-admin: the install's
// argocd-application-controller ClusterRole grants every verb on every resource too.
func (a *ArgoCD) controllerIdentity(ctx context.Context, c client.Client, cp *controlPlane) (string, error) {
	const user = "argocd-controllers"
	path, _, err := cp.userKubeconfig(user, user, nil)
	if err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := c.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("%s: binding %s to cluster-admin: %w", a.Cluster, user, err)
	}
	return path, nil
}

// shortSocketPath returns dir/name, or a path in a new folder under the system temp folder
// (removed when the fleet stops) when that would exceed the length limit of a Unix socket
// path (108 bytes on Linux).
func (f *Fleet) shortSocketPath(dir, name string) (string, error) {
	if p := filepath.Join(dir, name); len(p) < 100 {
		return p, nil
	}
	tmp, err := os.MkdirTemp("", "fleet-sock-")
	if err != nil {
		return "", err
	}
	f.OnStop(func() error { return os.RemoveAll(tmp) })
	return filepath.Join(tmp, name), nil
}

// argoManifest is what the fleet takes from Argo CD's install.yaml: the ConfigMaps and Secrets,
// and each component's container environment.
type argoManifest struct {
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
	env0       map[string][]corev1.EnvVar // component -> its container's env
}

func readArgoManifest(path string) (*argoManifest, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Argo CD install manifest (from hack/argocd-binaries.sh): %w", err)
	}
	defer fh.Close()
	m := &argoManifest{env0: map[string][]corev1.EnvVar{}}
	dec := utilyaml.NewYAMLOrJSONDecoder(fh, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		var into any
		switch u.GetKind() {
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			m.configMaps = append(m.configMaps, cm)
			into = cm
		case "Secret":
			s := &corev1.Secret{}
			m.secrets = append(m.secrets, s)
			into = s
		case "Deployment", "StatefulSet":
			switch u.GetName() {
			case ArgoCDApplicationController, ArgoCDRepoServer, ArgoCDApplicationSetController:
			default:
				continue
			}
			// Both kinds have the pod template at the same place.
			d := &appsv1.Deployment{}
			spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": map[string]any{"template": spec}}, d); err != nil {
				return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			for _, ctr := range d.Spec.Template.Spec.Containers {
				if ctr.Name == u.GetName() || len(d.Spec.Template.Spec.Containers) == 1 {
					m.env0[u.GetName()] = ctr.Env
				}
			}
			continue
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	for _, want := range []string{ArgoCDApplicationController, ArgoCDRepoServer, ArgoCDApplicationSetController} {
		if _, ok := m.env0[want]; !ok {
			return nil, fmt.Errorf("%s: no workload %s", path, want)
		}
	}
	return m, nil
}

// env resolves a component's environment as the kubelet would for its container: literal
// values, ConfigMap and Secret keys (read from the cluster, where applySettings wrote them;
// a missing optional key leaves the variable unset) and the pod's namespace.
//
// pinned values (ConfigMap name, then key) are used as they are, whatever the ConfigMap holds
// by now: the harness's own wiring must hold even when something else owns the ConfigMap (the
// addon's ManifestWork puts Argo CD's defaults back).
func (m *argoManifest) env(ctx context.Context, c client.Client, component, namespace string, pinned map[string]map[string]string) ([]string, error) {
	var out []string
	for _, e := range m.env0[component] {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.ConfigMapKeyRef != nil && pinned[e.ValueFrom.ConfigMapKeyRef.Name] != nil &&
			pinned[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key] != "":
			out = append(out, e.Name+"="+pinned[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key])
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := &corev1.ConfigMap{}
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, cm)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if v, ok := cm.Data[ref.Key]; ok {
				out = append(out, e.Name+"="+v)
			} else if ref.Optional == nil || !*ref.Optional {
				return nil, fmt.Errorf("%s: %s needs key %s of ConfigMap %s", component, e.Name, ref.Key, ref.Name)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s := &corev1.Secret{}
			err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, s)
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
			if v, ok := s.Data[ref.Key]; ok {
				out = append(out, e.Name+"="+string(v))
			} else if ref.Optional == nil || !*ref.Optional {
				return nil, fmt.Errorf("%s: %s needs key %s of Secret %s", component, e.Name, ref.Key, ref.Name)
			}
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out = append(out, e.Name+"="+namespace)
		}
	}
	return out, nil
}

// argoRedis is the Redis the Argo CD components share, served in-process by miniredis
// (github.com/alicebob/miniredis/v2, the Redis-compatible server Argo CD's own unit tests run
// its cache against): no redis-server binary, no package manager, no root. Argo CD uses Redis
// only as a cache (GET/SET with expiry, pub/sub), which miniredis serves. It requires the
// password of Secret argocd-redis, as the install's Redis does.
//
// miniredis never expires keys by itself (it is made for tests that move time by hand), and
// Argo CD relies on expiry, e.g. a resolved branch revision is cached for
// timeout.reconciliation: without expiry a new commit would never be seen. A ticker moves
// miniredis' clock with the real one.
type argoRedis struct {
	srv  *miniredis.Miniredis
	addr string
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func startArgoRedis(password string) (*argoRedis, error) {
	srv := miniredis.NewMiniRedis()
	srv.RequireAuth(password)
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("starting miniredis: %w", err)
	}
	r := &argoRedis{srv: srv, addr: srv.Addr(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		last := time.Now()
		for {
			select {
			case <-r.stop:
				return
			case now := <-tick.C:
				srv.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return r, nil
}

func (r *argoRedis) close() {
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.srv.Close()
	})
}
