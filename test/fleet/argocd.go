package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/node"
)

// Argo CD in the fleet
//
// StartArgoCD installs Argo CD from the pinned release (hack/argocd-binaries.sh builds its
// binaries and keeps its install.yaml) on one cluster. On a fleet with real nodes it runs as
// pods, from install.yaml exactly as a user applies it (see argocdpods.go). Without nodes it
// runs Argo CD's components as fleet processes against the cluster's API server, the way
// install.yaml runs them in pods:
//
//   - installing, as a user applies install.yaml to the Argo CD namespace: the CRDs
//     (Application, AppProject, ApplicationSet), every ConfigMap and Secret (argocd-cm,
//     argocd-cmd-params-cm, argocd-rbac-cm, argocd-secret, ...), and every ServiceAccount,
//     Role, ClusterRole and binding, with the ClusterRoleBindings' subjects in that namespace;
//     the redis password made by the redis pod's init container (argocd admin
//     redis-initial-password, run as the argocd-redis ServiceAccount);
//   - or, with ArgoCDOptions.Installed, none of that: what something else installed is used;
//   - each component's environment resolved from those ConfigMaps exactly as the manifest's
//     configMapKeyRef entries say, so a setting goes where a user would put it (for example
//     timeout.reconciliation in argocd-cm) and takes effect on the next start, as with a pod;
//   - each component authenticating as its pod's ServiceAccount (a client certificate of the
//     cluster CA naming system:serviceaccount:<namespace>:<name>), so it has exactly the RBAC
//     the install gives it;
//   - argocd-server (when installing: it makes the "default" AppProject and argocd-secret's
//     server.secretkey, as on a cluster), argocd-repo-server, argocd-application-controller and
//     optionally argocd-applicationset-controller, each on free loopback ports.
//
// Differences of the processes from a cluster install, each because there is no pod: the
// components reach the API server through a kubeconfig (ARGOCD_FAKE_IN_CLUSTER, Argo CD's
// switch for running outside a pod, makes the in-cluster destination
// https://kubernetes.default.svc use it too) and each other through loopback addresses pinned
// in their environment, where a cluster has Services; GnuPG commit verification is off
// (ARGOCD_GPG_ENABLED=false: it needs a gpg binary and the keyring the pod mounts); no Dex or
// notifications controller runs; argocd-server serves plain HTTP. Redis is in-process, see
// argoRedis.

// ArgoCDNamespace is the default namespace of an Argo CD started with StartArgoCD.
const ArgoCDNamespace = "argocd"

// Names of the Argo CD components (also their binaries' names and their workloads' names in
// install.yaml).
const (
	ArgoCDApplicationController    = "argocd-application-controller"
	ArgoCDRepoServer               = "argocd-repo-server"
	ArgoCDApplicationSetController = "argocd-applicationset-controller"
	ArgoCDServer                   = "argocd-server"
	// argoCDRedis names the Redis workload, its ServiceAccount and the Secret with its password.
	argoCDRedis = "argocd-redis"
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
	// ApplicationSetOnly runs argocd-applicationset-controller without repo-server and
	// application-controller, as a pull-model hub needs: its Applications carry skip-reconcile,
	// so no application-controller would act on them. When installing, argocd-server runs too
	// (it makes the "default" AppProject that generated Applications name), and with pods the
	// argocd-redis it needs.
	ApplicationSetOnly bool
	// ArgoCDCM and CmdParams are added to argocd-cm and argocd-cmd-params-cm over install.yaml's
	// data, e.g. {"timeout.reconciliation": "15s"}. With processes, the keys that wire
	// components to each other (repo.server, redis.server, listen addresses) are the harness's.
	ArgoCDCM  map[string]string
	CmdParams map[string]string
	// StartTimeout bounds the wait for each component (processes) or for all the workloads
	// (pods) to be ready. Default: 3 minutes with processes, 6 with pods.
	StartTimeout time.Duration
	// Installed uses an Argo CD that something else installed on the cluster (the components
	// addon, say): the CRDs, ConfigMaps, Secrets, ServiceAccounts and RBAC are those already
	// there. With processes, each component authenticates as the ServiceAccount its installed
	// workload names and Redis takes the password of the installed Secret argocd-redis. With
	// pods, StartArgoCD writes nothing but ArgoCDCM's keys into argocd-cm (then it deletes the
	// application-controller's pods, which read those settings at start, if that changed the
	// ConfigMap), waits until the installed workloads (argocd-redis, argocd-repo-server,
	// argocd-application-controller, as the options ask) are ready, and Stop deletes nothing;
	// CmdParams and CMPSidecarImage are refused. Without Installed, StartArgoCD installs Argo
	// CD as a user applies install.yaml (and runs argocd-server too).
	Installed bool
	// Workloads (processes only) also creates install.yaml's Deployment and StatefulSet objects
	// of the components, as kubectl apply of install.yaml does (no kubelet starts their pods:
	// the processes stand in for them), for a test that needs them to be there. With pods it is
	// implied: the workloads are what runs.
	Workloads bool
	// Plugins (processes only) are Config Management Plugins, each a folder holding a
	// plugin.yaml: each runs as argocd-cmp-server, the repo-server's sidecar in a pod, on a
	// Unix socket in a folder the repo-server is pointed at (ARGOCD_PLUGINSOCKFILEPATH, as the
	// shared plugins volume). A plugin.yaml names a host binary, which a pod cannot run: with
	// pods use CMPSidecarImage.
	Plugins []string
	// CMPSidecarImage (pods only) is the project's image in the fleet's registry: the
	// ocm-manifestwork Config Management Plugin then runs as argocd-repo-server's sidecar as the
	// chart's cmp.sidecar.install=true puts it there, from the product's own code: its
	// plugin.yaml (cmp.PluginConfig, the text of the chart's ConfigMap) in ConfigMap
	// argocd-agent-addon-cmp-plugin, and the container that cmp.Sidecar.Apply (what the chart's
	// install-sidecar hook runs) adds to the repo-server's Deployment.
	CMPSidecarImage string
}

// ArgoCD is Argo CD running against one cluster of the fleet.
type ArgoCD struct {
	// Cluster is "hub" or a managed cluster's name; Namespace is Argo CD's namespace there.
	Cluster   string
	Namespace string
	// RepoServer and Redis are the addresses the components use: loopback addresses with
	// processes; with pods, the Services' names (host:port, resolved by the cluster DNS, so
	// reachable from pods only), empty for a component that does not run.
	RepoServer string
	Redis      string
	// Processes are the components, in start order (none with pods).
	Processes []*Process

	redis    *argoRedis
	pods     *argoPods
	stopOnce sync.Once
	stopErr  error
}

// StartArgoCD installs and starts Argo CD on cluster ("hub" or a managed cluster) and returns
// once every component is ready: as pods on a fleet with real nodes (see argocdpods.go), else
// as fleet processes. The fleet's Stop ends it too; ArgoCD.Stop ends it earlier.
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
		if f.opts.RealNodes {
			opts.StartTimeout = 6 * time.Minute
		}
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
	if !opts.Installed {
		if err := f.installCRDs(ctx, cp, []string{filepath.Join(opts.BinDir, "crds")}); err != nil {
			return nil, err
		}
	}
	if err := EnsureNamespaces(ctx, c, opts.Namespace); err != nil {
		return nil, err
	}
	if f.opts.RealNodes {
		return f.startArgoCDPods(ctx, cp, c, manifest, opts)
	}
	return f.startArgoCDProcesses(ctx, cp, c, manifest, opts)
}

// startArgoCDProcesses runs the components as fleet processes, for a fleet without nodes.
func (f *Fleet) startArgoCDProcesses(ctx context.Context, cp *controlPlane, c client.Client, manifest *argoManifest, opts ArgoCDOptions) (*ArgoCD, error) {
	cluster := cp.name
	if opts.CMPSidecarImage != "" {
		return nil, errors.New("ArgoCDOptions.CMPSidecarImage needs a fleet with real nodes: without, use Plugins")
	}
	var err error
	a := &ArgoCD{Cluster: cluster, Namespace: opts.Namespace}
	fail := func(err error) (*ArgoCD, error) { return nil, errors.Join(err, a.Stop()) }

	var p [8]int
	for i := range p {
		if p[i], err = f.ports.next(); err != nil {
			return nil, err
		}
	}
	repoPort, repoMetrics, ctrlMetrics, appsetMetrics, appsetProbe, appsetWebhook, serverPort, serverMetrics := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
	a.RepoServer = "127.0.0.1:" + strconv.Itoa(repoPort)

	cmdParams := map[string]string{}
	for k, v := range opts.CmdParams {
		cmdParams[k] = v
	}
	if !opts.Installed {
		// kubectl apply -n <namespace> -f install.yaml, with the ClusterRoleBindings' subjects
		// moved to that namespace as Argo CD's docs ask for a namespace other than argocd.
		if err := a.install(ctx, c, manifest, opts.ArgoCDCM, cmdParams); err != nil {
			return fail(err)
		}
		if opts.Workloads {
			for _, name := range argoComponents {
				w := manifest.workloads[name].DeepCopy()
				w.SetNamespace(a.Namespace)
				if err := createOrReplace(ctx, c, w, func(have client.Object) {
					have.(*unstructured.Unstructured).Object["spec"] = w.Object["spec"]
				}); err != nil {
					return fail(fmt.Errorf("%s: %s %s: %w", cluster, w.GetKind(), w.GetName(), err))
				}
			}
		}
		// The install's redis pod runs this as its init container before Redis starts.
		if _, err := f.RunAsServiceAccount(ctx, cluster, a.Namespace, argoCDRedis, "admin", "redis-initial-password", "--namespace="+a.Namespace); err != nil {
			return fail(err)
		}
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: argoCDRedis}, s); err != nil {
		return fail(fmt.Errorf("%s: reading the Redis password: %w", cluster, err))
	}
	redisPassword := string(s.Data["auth"])
	if redisPassword == "" {
		return fail(fmt.Errorf("%s: Secret %s/%s has no auth key", cluster, opts.Namespace, argoCDRedis))
	}
	if a.redis, err = startArgoRedis(redisPassword); err != nil {
		return fail(err)
	}
	f.OnStop(a.closeRedis)
	a.Redis = a.redis.addr

	// The harness's wiring, where a cluster would use Services: pinned in each component's
	// environment, whatever the ConfigMap holds.
	cmdParams["repo.server"] = a.RepoServer
	cmdParams["server.repo.server"] = a.RepoServer
	cmdParams["redis.server"] = a.Redis
	cmdParams["reposerver.listen.address"] = "127.0.0.1"
	cmdParams["server.listen.address"] = "127.0.0.1"
	cmdParams["server.metrics.listen.address"] = "127.0.0.1"
	cmdParams["server.insecure"] = "true"

	dir := filepath.Join(cp.dir, "argocd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	type component struct {
		name   string
		args   []string
		health string // URL that answers 200 once the component is up
	}
	var specs []component
	if !opts.Installed {
		// It creates the "default" AppProject and argocd-secret's server.secretkey at start-up,
		// which the other components expect; start it first.
		specs = append(specs, component{ArgoCDServer, []string{
			"--namespace=" + a.Namespace,
			"--port=" + strconv.Itoa(serverPort), "--metrics-port=" + strconv.Itoa(serverMetrics),
		}, fmt.Sprintf("http://127.0.0.1:%d/healthz", serverPort)})
	}
	if !opts.ApplicationSetOnly {
		specs = append(specs,
			component{ArgoCDRepoServer, []string{
				"--port=" + strconv.Itoa(repoPort),
				"--metrics-address=127.0.0.1", "--metrics-port=" + strconv.Itoa(repoMetrics),
			}, fmt.Sprintf("http://127.0.0.1:%d/healthz?full=true", repoMetrics)},
			// Its metrics server binds all interfaces (Argo CD has no flag for the address).
			component{ArgoCDApplicationController, []string{
				"--namespace=" + a.Namespace,
				"--metrics-port=" + strconv.Itoa(ctrlMetrics),
			}, fmt.Sprintf("http://127.0.0.1:%d/healthz", ctrlMetrics)})
	}
	if opts.ApplicationSetController || opts.ApplicationSetOnly {
		specs = append(specs, component{ArgoCDApplicationSetController, []string{
			"--namespace=" + a.Namespace,
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
		identity, err := a.identity(ctx, c, cp, manifest, s.name, opts.Installed)
		if err != nil {
			return fail(err)
		}
		if s.name != ArgoCDRepoServer { // it reads KUBECONFIG only
			s.args = append(s.args, "--kubeconfig="+identity)
		}
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
				return false, fmt.Errorf("%s exited: %v; last log lines:\n%s", proc.Name, err, node.Tail(proc.LogPath, 25))
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
				return false, fmt.Errorf("%s exited: %v; last log lines:\n%s", proc.Name, err, node.Tail(proc.LogPath, 25))
			}
			found, err := filepath.Glob(filepath.Join(socks, "*.sock"))
			return len(found) >= want, err
		}); err != nil {
			return "", err
		}
	}
	return socks, nil
}

// Stop ends the Argo CD components and their Redis: the processes, or the workloads
// StartArgoCD created, once their pods are gone (with Installed, nothing). Safe to call more
// than once, and after the fleet's Stop.
func (a *ArgoCD) Stop() error {
	a.stopOnce.Do(func() {
		if a.pods != nil {
			a.stopErr = a.pods.stop()
			return
		}
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

// install applies install.yaml's ConfigMaps, Secrets, ServiceAccounts and RBAC to the
// namespace, as a user installing Argo CD does, with the given additions to argocd-cm and
// argocd-cmd-params-cm. A ConfigMap's data is replaced, so a second StartArgoCD on the same
// cluster configures it afresh; a Secret's data is kept (argocd-server writes into
// argocd-secret), as kubectl apply keeps the keys a manifest does not name.
func (a *ArgoCD) install(ctx context.Context, c client.Client, m *argoManifest, argoCDCM, cmdParams map[string]string) error {
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
			return fmt.Errorf("%s: ConfigMap %s: %w", a.Cluster, cm.Name, err)
		}
	}
	for _, s := range m.secrets {
		s := s.DeepCopy()
		s.Namespace = a.Namespace
		if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: Secret %s: %w", a.Cluster, s.Name, err)
		}
	}
	rbac := make([]*unstructured.Unstructured, 0, len(m.rbac))
	for _, o := range m.rbac {
		o := o.DeepCopy()
		if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
			o.SetNamespace(a.Namespace)
		}
		if o.GetKind() == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, sub := range subjects {
				sub.(map[string]any)["namespace"] = a.Namespace
			}
			_ = unstructured.SetNestedSlice(o.Object, subjects, "subjects")
		}
		rbac = append(rbac, o)
	}
	if err := applyObjects(ctx, c, rbac, mergeSubjects); err != nil {
		return fmt.Errorf("%s: Argo CD RBAC: %w", a.Cluster, err)
	}
	return nil
}

// mergeSubjects keeps the subjects a ClusterRoleBinding already has besides the new ones: two
// Argo CDs in different namespaces of one cluster share install.yaml's ClusterRoleBindings.
func mergeSubjects(have, want *unstructured.Unstructured) {
	if want.GetKind() != "ClusterRoleBinding" {
		return
	}
	old, _, _ := unstructured.NestedSlice(have.Object, "subjects")
	subjects, _, _ := unstructured.NestedSlice(want.Object, "subjects")
	for _, o := range old {
		if !slices.ContainsFunc(subjects, func(s any) bool { return reflect.DeepEqual(s, o) }) {
			subjects = append(subjects, o)
		}
	}
	_ = unstructured.SetNestedSlice(want.Object, subjects, "subjects")
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

// identity writes a kubeconfig for a component: a client certificate of the cluster CA naming
// the ServiceAccount its workload runs as (install.yaml's, or with installed the one the
// installed workload names), so it has exactly the RBAC the install binds to it.
func (a *ArgoCD) identity(ctx context.Context, c client.Client, cp *controlPlane, m *argoManifest, component string, installed bool) (string, error) {
	sa := m.serviceAccount[component]
	if installed {
		var pod *corev1.PodSpec
		if component == ArgoCDApplicationController {
			sts := &appsv1.StatefulSet{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: component}, sts); err != nil {
				return "", fmt.Errorf("%s: the installed %s: %w", a.Cluster, component, err)
			}
			pod = &sts.Spec.Template.Spec
		} else {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: component}, d); err != nil {
				return "", fmt.Errorf("%s: the installed %s: %w", a.Cluster, component, err)
			}
			pod = &d.Spec.Template.Spec
		}
		sa = pod.ServiceAccountName
	}
	if sa == "" {
		sa = "default"
	}
	path, _, err := cp.userKubeconfig("argocd-"+a.Namespace+"-"+component, ServiceAccountUser(a.Namespace, sa), ServiceAccountGroups(a.Namespace))
	return path, err
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
// RBAC, Services and NetworkPolicies, and the workloads of the components the fleet runs with
// each one's container environment.
type argoManifest struct {
	// workloads are install.yaml's Deployments and StatefulSet by name: argoComponents' and
	// argocd-redis.
	workloads      map[string]*unstructured.Unstructured
	configMaps     []*corev1.ConfigMap
	secrets        []*corev1.Secret
	rbac           []*unstructured.Unstructured // ServiceAccounts, (Cluster)Roles and their bindings
	services       []*unstructured.Unstructured // Services and NetworkPolicies
	env0           map[string][]corev1.EnvVar   // component -> its container's env
	serviceAccount map[string]string            // component -> its pod's ServiceAccount
}

// argoComponents are the Argo CD components the fleet runs (Dex and the notifications
// controller are left out).
var argoComponents = []string{ArgoCDApplicationController, ArgoCDRepoServer, ArgoCDApplicationSetController, ArgoCDServer}

func readArgoManifest(path string) (*argoManifest, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Argo CD install manifest (from hack/argocd-binaries.sh): %w", err)
	}
	defer fh.Close()
	m := &argoManifest{workloads: map[string]*unstructured.Unstructured{}, env0: map[string][]corev1.EnvVar{}, serviceAccount: map[string]string{}}
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
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			m.rbac = append(m.rbac, u)
			continue
		case "Service", "NetworkPolicy":
			m.services = append(m.services, u)
			continue
		case "Deployment", "StatefulSet":
			if u.GetName() == argoCDRedis {
				m.workloads[u.GetName()] = u
				continue
			}
			if !slices.Contains(argoComponents, u.GetName()) {
				continue
			}
			m.workloads[u.GetName()] = u
			// Both kinds have the pod template at the same place.
			d := &appsv1.Deployment{}
			spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template")
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"spec": map[string]any{"template": spec}}, d); err != nil {
				return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
			}
			m.serviceAccount[u.GetName()] = d.Spec.Template.Spec.ServiceAccountName
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
	for _, want := range append([]string{argoCDRedis}, argoComponents...) {
		if _, ok := m.workloads[want]; !ok {
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
