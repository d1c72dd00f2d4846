package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	// HubNamespace is where the OCM hub controllers run (events, addon signing CA default).
	HubNamespace = "open-cluster-management-hub"
	// AgentNamespace and AddonNamespace must exist on a managed cluster before its agent starts.
	AgentNamespace = "open-cluster-management-agent"
	AddonNamespace = "open-cluster-management-agent-addon"
	// BootstrapUser is the hub identity in every cluster's bootstrap kubeconfig; the fleet
	// accepts the clusters it registers as `clusteradm accept` does.
	BootstrapUser  = "fleet-bootstrap"
	bootstrapGroup = "system:bootstrappers:managedcluster"
)

// Scheme knows the core Kubernetes types and the OCM types the fleet touches.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.Install, clusterv1beta1.Install, clusterv1beta2.Install,
		workv1.Install, addonv1alpha1.Install,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// hubCRDPaths: everything the registration, placement and addon controllers read or write.
// Addon CRDs from addon/v1alpha1 serve v1alpha1 only, so no conversion webhook is needed (none
// of these processes reads v1beta1).
func hubCRDPaths(api string) []string {
	return []string{
		filepath.Join(api, "cluster", "v1"),
		filepath.Join(api, "cluster", "v1beta1"),
		filepath.Join(api, "cluster", "v1beta2"),
		filepath.Join(api, "cluster", "v1alpha1", "0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml"),
		filepath.Join(api, "addon", "v1alpha1"),
		filepath.Join(api, "work", "v1", "0000_00_work.open-cluster-management.io_manifestworks.crd.yaml"),
	}
}

// spokeCRDPaths: what the klusterlet operator would install on a managed cluster.
func spokeCRDPaths(api string) []string {
	return []string{
		filepath.Join(api, "cluster", "v1alpha1", "0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml"),
		filepath.Join(api, "work", "v1", "0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml"),
	}
}

// installCRDs creates the CRDs in the given files or folders (every *.yaml/*.yml/*.json in a
// folder, multi-document files allowed) and waits until each is established. Existing CRDs are
// left alone. (envtest.InstallCRDs would do the same but logs through controller-runtime's
// global logger, which a library must not set.)
func (f *Fleet) installCRDs(ctx context.Context, cp *controlPlane, paths []string) error {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: CRD path: %w", cp.name, err)
		} else if st.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			files = nil
			for _, e := range entries {
				switch filepath.Ext(e.Name()) {
				case ".yaml", ".yml", ".json":
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
		for _, file := range files {
			got, err := readCRDs(file)
			if err != nil {
				return fmt.Errorf("%s: %w", cp.name, err)
			}
			crds = append(crds, got...)
		}
	}
	c, err := cp.adminClient(f.scheme)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating CRD %s: %w", cp.name, crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := f.poll(ctx, cp.name+" CRD "+crd.Name+" to be established", startBudget, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func readCRDs(file string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(fh, 4096)
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue // e.g. an empty document
		}
		out = append(out, crd)
	}
}

// EnsureNamespaces creates the namespaces that do not exist yet.
func EnsureNamespaces(ctx context.Context, c client.Client, names ...string) error {
	for _, n := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
	}
	return nil
}

// setupHub installs OCM's hub CRDs, namespaces and bootstrap RBAC, then starts the hub
// controllers. What a ClusterManager would do, minus the operator and the pods.
func (f *Fleet) setupHub(ctx context.Context) error {
	api, err := testenv.OCMAPIDir()
	if err != nil {
		return err
	}
	if err := f.installCRDs(ctx, f.hub, append(hubCRDPaths(api), f.opts.HubCRDPaths...)); err != nil {
		return err
	}
	c := f.hubClient
	if err := EnsureNamespaces(ctx, c, HubNamespace, f.opts.BindingNamespace); err != nil {
		return err
	}
	// The permissions of OCM's bootstrap ClusterRole (cluster-manager chart), bound to the group
	// of the bootstrap identity.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "open-cluster-management:bootstrap"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
			{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "create", "list", "watch"}},
			{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets/join"}, Verbs: []string{"create"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "open-cluster-management:bootstrap:managedcluster"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: bootstrapGroup}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", obj.GetName(), err)
		}
	}

	// The hub controllers, each as the ServiceAccount OCM's ClusterManager operator runs it
	// as, with the RBAC the operator applies (rendered from OCM's own manifests), and its own
	// health port.
	if err := f.installHubRBAC(ctx); err != nil {
		return err
	}
	for _, p := range hubComponents {
		sa := testenv.ServiceAccount(HubNamespace, p.serviceAccount)
		kubeconfig, _, err := f.hub.userKubeconfig(p.name, sa.User, sa.Groups)
		if err != nil {
			return err
		}
		port, err := freePorts.next()
		if err != nil {
			return err
		}
		args := slices.Concat(hubControllerArgs[p.name], fleetHubFlags(kubeconfig, port), f.opts.HubControllerArgs[p.name])
		if _, err := f.start(ProcessSpec{
			Name: "hub-" + p.name,
			Path: filepath.Join(f.ocmBin, p.bin),
			Args: args,
			Env:  []string{"POD_NAMESPACE=" + HubNamespace},
		}, tierController); err != nil {
			return err
		}
	}
	f.logf("hub: OCM controllers started")
	return nil
}

// fleetHubFlags are the flags the fleet sets on every OCM hub controller.
func fleetHubFlags(kubeconfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + HubNamespace,
		"--listen=127.0.0.1:" + strconv.Itoa(port),
		"--disable-leader-election",
	}
}

// flagName is the name of a "--name[=value]" flag, or "" for a word that is not one.
func flagName(arg string) string {
	if !strings.HasPrefix(arg, "--") {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
	return name
}

// checkHubControllerArgs refuses extra flags (Options.HubControllerArgs) for a controller the
// fleet does not run, a word that is not a --flag, and a flag the fleet sets itself (a later
// one of the same name would replace the fleet's without a word).
func checkHubControllerArgs(extra map[string][]string) error {
	var owned []string
	for _, arg := range fleetHubFlags("", 0) {
		owned = append(owned, flagName(arg))
	}
	for name, args := range extra {
		if _, ok := hubControllerArgs[name]; !ok {
			return fmt.Errorf("HubControllerArgs: no OCM hub controller named %q", name)
		}
		for _, arg := range args {
			switch flag := flagName(arg); {
			case flag == "":
				return fmt.Errorf("HubControllerArgs[%q]: %q is not a --name=value flag", name, arg)
			case slices.Contains(owned, flag):
				return fmt.Errorf("HubControllerArgs[%q]: the fleet sets --%s itself", name, flag)
			}
		}
	}
	return nil
}

// hubControllerArgs are the OCM hub controllers' own flags. No auto-approval: OCM's approves a
// bootstrap CSR without waiting for the cluster's ManagedCluster, and an agent whose
// certificate arrives before its ManagedCluster was created stops creating it and never joins;
// the fleet accepts its clusters itself (acceptCluster).
var hubControllerArgs = map[string][]string{
	"registration-controller": {"controller"},
	"placement-controller":    {"controller"},
	"addon-manager":           {"manager"},
}

// joinSpoke prepares a managed cluster (CRDs, agent namespaces, bootstrap kubeconfig) and starts
// its klusterlet agent, which registers with the hub through a CSR.
func (f *Fleet) joinSpoke(ctx context.Context, cp *controlPlane) error {
	api, err := testenv.OCMAPIDir()
	if err != nil {
		return err
	}
	if err := f.installCRDs(ctx, cp, append(spokeCRDPaths(api), f.opts.SpokeCRDPaths...)); err != nil {
		return err
	}
	sc, err := cp.adminClient(f.scheme)
	if err != nil {
		return err
	}
	if err := EnsureNamespaces(ctx, sc, AgentNamespace, AddonNamespace); err != nil {
		return err
	}
	// The bootstrap kubeconfig: the hub's address and CA, and a client certificate for the
	// bootstrap identity signed by the hub CA.
	cert, key, err := f.hub.ca.issue(BootstrapUser, []string{bootstrapGroup}, nil)
	if err != nil {
		return err
	}
	bootstrap := filepath.Join(cp.dir, "bootstrap-hub.kubeconfig")
	if _, err := writeKubeconfig(bootstrap, "hub", f.hub.url, f.hub.ca.certPEM, cert, key); err != nil {
		return err
	}
	// The agent runs as the ServiceAccount a Singleton klusterlet runs as, with the RBAC OCM's
	// Klusterlet operator applies.
	if err := f.installKlusterletRBAC(ctx, sc, cp.name); err != nil {
		return err
	}
	agentSA := testenv.ServiceAccount(AgentNamespace, KlusterletWorkServiceAccount)
	agentKubeconfig, _, err := cp.userKubeconfig("klusterlet-agent", agentSA.User, agentSA.Groups)
	if err != nil {
		return err
	}
	hubKubeconfigDir := filepath.Join(cp.dir, "hub-kubeconfig")
	if err := os.MkdirAll(hubKubeconfigDir, 0o700); err != nil {
		return err
	}
	port, err := freePorts.next()
	if err != nil {
		return err
	}
	_, err = f.start(ProcessSpec{
		Name: cp.name + "-klusterlet-agent",
		Path: filepath.Join(f.ocmBin, "registration-operator"),
		Args: []string{"agent",
			"--spoke-cluster-name=" + cp.name,
			"--bootstrap-kubeconfig=" + bootstrap,
			"--hub-kubeconfig-dir=" + hubKubeconfigDir,
			// The work agent inside reads the hub kubeconfig registration writes there.
			"--workload-source-config=" + filepath.Join(hubKubeconfigDir, "kubeconfig"),
			"--kubeconfig=" + agentKubeconfig,
			"--namespace=" + AgentNamespace,
			"--spoke-external-server-urls=" + cp.url,
			"--listen=127.0.0.1:" + strconv.Itoa(port),
			"--disable-leader-election",
			"--cluster-healthcheck-period=10s",
		},
		Env: []string{"POD_NAMESPACE=" + AgentNamespace},
	}, tierAgent)
	return err
}

// acceptAndBind waits until every cluster is accepted, joined and available, puts them into
// the cluster set, and binds the set to the binding namespace.
func (f *Fleet) acceptAndBind(ctx context.Context) error {
	c := f.hubClient
	set := f.opts.ClusterSet
	for _, name := range f.opts.Clusters {
		if err := f.poll(ctx, "ManagedCluster "+name+" to register", f.opts.StartTimeout, func(ctx context.Context) (bool, error) {
			return acceptCluster(ctx, c, name, set)
		}); err != nil {
			return err
		}
	}
	cs := &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: set}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, cs, func() error {
		cs.Spec.ClusterSelector.SelectorType = clusterv1beta2.ExclusiveClusterSetLabel
		return nil
	}); err != nil {
		return fmt.Errorf("creating ManagedClusterSet %s: %w", set, err)
	}
	csb := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: f.opts.BindingNamespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, csb, func() error {
		csb.Spec.ClusterSet = set
		return nil
	}); err != nil {
		return fmt.Errorf("creating ManagedClusterSetBinding %s/%s: %w", f.opts.BindingNamespace, set, err)
	}
	for _, name := range f.opts.Clusters {
		if err := f.WaitForClusterReady(ctx, name, f.opts.StartTimeout); err != nil {
			return err
		}
	}
	return f.poll(ctx, "ManagedClusterSetBinding to be bound", f.opts.StartTimeout, func(ctx context.Context) (bool, error) {
		b := &clusterv1beta2.ManagedClusterSetBinding{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(csb), b); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(b.Status.Conditions, clusterv1beta2.ClusterSetBindingBoundType), nil
	})
}

// WaitForClusterReady waits until the hub reports the ManagedCluster accepted, joined and
// available.
func (f *Fleet) WaitForClusterReady(ctx context.Context, name string, timeout time.Duration) error {
	return f.poll(ctx, "ManagedCluster "+name+" to be joined and available", timeout, func(ctx context.Context) (bool, error) {
		mc := &clusterv1.ManagedCluster{}
		if err := f.hubClient.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return false, err
		}
		for _, t := range []string{
			clusterv1.ManagedClusterConditionHubAccepted,
			clusterv1.ManagedClusterConditionJoined,
			clusterv1.ManagedClusterConditionAvailable,
		} {
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, t) {
				return false, nil
			}
		}
		return true, nil
	})
}
