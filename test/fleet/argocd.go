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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// Argo CD in the fleet
//
// StartArgoCD installs Argo CD from the pinned release (hack/argocd-binaries.sh builds its
// binaries and keeps its install.yaml) on one cluster of a fleet with real nodes, where it runs
// as pods, from install.yaml exactly as a user applies it (see argocdpods.go).

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
	// data, e.g. {"timeout.reconciliation": "15s"}.
	ArgoCDCM  map[string]string
	CmdParams map[string]string
	// StartTimeout bounds the wait for all the workloads to be ready. Default: 6 minutes.
	StartTimeout time.Duration
	// Installed uses an Argo CD that something else installed on the cluster (the components
	// addon, say): the CRDs, ConfigMaps, Secrets, ServiceAccounts and RBAC are those already
	// there. StartArgoCD writes nothing but ArgoCDCM's keys into argocd-cm (then it deletes the
	// application-controller's pods, which read those settings at start, if that changed the
	// ConfigMap), waits until the installed workloads (argocd-redis, argocd-repo-server,
	// argocd-application-controller, as the options ask) are ready, and Stop deletes nothing;
	// CmdParams are refused. Without Installed, StartArgoCD installs Argo
	// CD as a user applies install.yaml (and runs argocd-server too).
	Installed bool
}

// ArgoCD is Argo CD running against one cluster of the fleet.
type ArgoCD struct {
	// Cluster is "hub" or a managed cluster's name; Namespace is Argo CD's namespace there.
	Cluster   string
	Namespace string
	// RepoServer and Redis are the addresses the components use: the Services' names
	// (host:port, resolved by the cluster DNS, so reachable from pods only), empty for a
	// component that does not run.
	RepoServer string
	Redis      string

	pods     *argoPods
	stopOnce sync.Once
	stopErr  error
}

// StartArgoCD installs and starts Argo CD on cluster ("hub" or a managed cluster) and returns
// once every component is ready, as pods (see argocdpods.go): the fleet needs real nodes. The
// fleet's Stop ends it too; ArgoCD.Stop ends it earlier.
func (f *Fleet) StartArgoCD(ctx context.Context, cluster string, opts ArgoCDOptions) (*ArgoCD, error) {
	if !f.opts.RealNodes {
		return nil, errors.New("StartArgoCD runs Argo CD as pods: the fleet needs Options.RealNodes")
	}
	cp, err := f.plane(cluster)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = ArgoCDNamespace
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 6 * time.Minute
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
	c, err := cp.adminClient(f.scheme)
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
	return f.startArgoCDPods(ctx, cp, c, manifest, opts)
}

// Stop deletes the workloads StartArgoCD created and returns once their pods are gone (with
// Installed, it deletes nothing). Safe to call more than once, and after the fleet's Stop.
func (a *ArgoCD) Stop() error {
	a.stopOnce.Do(func() {
		if a.pods != nil {
			a.stopErr = a.pods.stop()
		}
	})
	return a.stopErr
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
	if err := applyObjects(ctx, c, testenv.ArgoCDInNamespace(a.Namespace, m.rbac), mergeSubjects); err != nil {
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

// argoManifest is what the fleet takes from Argo CD's install.yaml: the ConfigMaps and Secrets,
// RBAC, Services and NetworkPolicies, and the workloads of the components the fleet runs with
// each one's container environment.
type argoManifest struct {
	// workloads are install.yaml's Deployments and StatefulSet by name: argoComponents' and
	// argocd-redis.
	workloads  map[string]*unstructured.Unstructured
	configMaps []*corev1.ConfigMap
	secrets    []*corev1.Secret
	rbac       []*unstructured.Unstructured // ServiceAccounts, (Cluster)Roles and their bindings
	services   []*unstructured.Unstructured // Services and NetworkPolicies
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
	m := &argoManifest{workloads: map[string]*unstructured.Unstructured{}}
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
			if u.GetName() == argoCDRedis || slices.Contains(argoComponents, u.GetName()) {
				m.workloads[u.GetName()] = u
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
