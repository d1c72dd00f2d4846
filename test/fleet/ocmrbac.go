package fleet

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OCM's components run here with the identity and RBAC OCM's operator gives them: their
// ServiceAccounts, ClusterRoles, Roles and bindings are rendered from the manifests of the
// pinned OCM module (copied next to its binaries by hack/ocm-binaries.sh) with the values the
// operator uses, and each process authenticates as its ServiceAccount.

// KlusterletWorkServiceAccount is the ServiceAccount a Singleton klusterlet's agent (registration
// and work in one process) runs as: OCM names it after the work agent's.
const KlusterletWorkServiceAccount = "klusterlet-work-sa"

// hubComponents are the hub controllers, with the manifest folder and ServiceAccount of each.
var hubComponents = []struct{ name, bin, dir, serviceAccount string }{
	{"registration-controller", "registration", "registration", "registration-controller-sa"},
	{"placement-controller", "placement", "placement", "placement-controller-sa"},
	{"addon-manager", "addon", "addon-manager", "addon-manager-controller-sa"},
}

// hubValues are the ClusterManager operator's template values that the RBAC manifests read.
func hubValues() map[string]any {
	return map[string]any{
		"ClusterManagerName":                "cluster-manager",
		"ClusterManagerNamespace":           HubNamespace,
		"Labels":                            map[string]string{},
		"ManagedClusterIdentityCreatorRole": "",
		"ClusterImporterEnabled":            false,
		"ClusterProfileEnabled":             false,
		"GRPCAuthEnabled":                   false,
	}
}

// klusterletValues are the Klusterlet operator's template values for a Singleton klusterlet
// named "klusterlet" in its default namespace.
func klusterletValues() map[string]any {
	return map[string]any{
		"KlusterletName":             "klusterlet",
		"KlusterletNamespace":        AgentNamespace,
		"AgentNamespace":             AgentNamespace,
		"RegistrationServiceAccount": KlusterletWorkServiceAccount,
		"WorkServiceAccount":         KlusterletWorkServiceAccount,
		"ManagedClusterRoleArn":      "",
		"RegistrationDriver":         map[string]any{"AuthType": ""},
		"Labels":                     map[string]string{},
	}
}

// renderOCMManifests renders the named manifests under dir and returns their objects.
func renderOCMManifests(dir string, files []string, values map[string]any) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range files {
		path := filepath.Join(dir, f)
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading OCM manifest %s (hack/ocm-binaries.sh copies them from the module): %w", path, err)
		}
		tpl, err := template.New(f).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", path, err)
		}
		var buf bytes.Buffer
		if err := tpl.Execute(&buf, values); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", path, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(&buf, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decoding %s: %w", path, err)
			}
			if u.GetKind() != "" {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// applyObjects creates objs, or replaces what exists. As OCM's operators apply them (through
// openshift/library-go's resource merge), an annotation or label whose key ends in "-" means
// "remove this key" and is not written. merge, when set, may adjust what is written from what
// exists.
func applyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, merge func(have, want *unstructured.Unstructured)) error {
	for _, o := range objs {
		o.SetAnnotations(withoutRemovals(o.GetAnnotations()))
		o.SetLabels(withoutRemovals(o.GetLabels()))
		err := createOrReplace(ctx, c, o, func(have client.Object) {
			h := have.(*unstructured.Unstructured)
			if merge != nil {
				merge(h, o)
			}
			rv := h.GetResourceVersion()
			h.Object = o.DeepCopy().Object
			h.SetResourceVersion(rv)
		})
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// hubRBACFiles are the RBAC manifests of one hub component's folder.
var hubRBACFiles = []string{"serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml"}

// klusterletRBACFiles are the RBAC manifests a Default-mode Klusterlet operator applies on the
// managed cluster (its ServiceAccounts, ClusterRoles, Roles and bindings), relative to the
// klusterlet manifests folder.
var klusterletRBACFiles = []string{
	"managed/klusterlet-registration-serviceaccount.yaml",
	"managed/klusterlet-registration-clusterrole.yaml",
	"managed/klusterlet-registration-clusterrolebinding.yaml",
	"managed/klusterlet-registration-clusterrole-addon-management.yaml",
	"managed/klusterlet-registration-clusterrolebinding-addon-management.yaml",
	"managed/klusterlet-work-serviceaccount.yaml",
	"managed/klusterlet-work-clusterrole.yaml",
	"managed/klusterlet-work-clusterrole-execution.yaml",
	"managed/klusterlet-work-clusterrolebinding.yaml",
	"managed/klusterlet-work-clusterrolebinding-aggregate.yaml",
	"managed/klusterlet-work-clusterrolebinding-execution-admin.yaml",
	"management/klusterlet-registration-role.yaml",
	"management/klusterlet-registration-rolebinding.yaml",
	"management/klusterlet-registration-clusterrole-addon-management.yaml",
	"management/klusterlet-registration-clusterrolebinding-addon-management.yaml",
	"management/klusterlet-role-extension-apiserver.yaml",
	"management/klusterlet-registration-rolebinding-extension-apiserver.yaml",
	"management/klusterlet-work-role.yaml",
	"management/klusterlet-work-rolebinding.yaml",
	"management/klusterlet-work-rolebinding-extension-apiserver.yaml",
}

// installHubRBAC applies each hub controller's ServiceAccount and RBAC as the ClusterManager
// operator does.
func (f *Fleet) installHubRBAC(ctx context.Context) error {
	for _, hc := range hubComponents {
		objs, err := renderOCMManifests(filepath.Join(f.ocmBin, "manifests", "cluster-manager", "hub", hc.dir), hubRBACFiles, hubValues())
		if err != nil {
			return err
		}
		if err := applyObjects(ctx, f.hubClient, objs, nil); err != nil {
			return fmt.Errorf("hub: %s RBAC: %w", hc.name, err)
		}
	}
	return nil
}

// installKlusterletRBAC applies the klusterlet agent's ServiceAccount and RBAC on a managed
// cluster as the Klusterlet operator does.
func (f *Fleet) installKlusterletRBAC(ctx context.Context, c client.Client, cluster string) error {
	objs, err := renderOCMManifests(filepath.Join(f.ocmBin, "manifests", "klusterlet"), klusterletRBACFiles, klusterletValues())
	if err != nil {
		return err
	}
	// The work agent's aggregate ClusterRole, which the operator creates in code (not from a
	// manifest): it gathers every ClusterRole labelled open-cluster-management.io/aggregate-to-work.
	aggregate := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRole",
		"metadata":   map[string]any{"name": "open-cluster-management:klusterlet-work:aggregate"},
		"aggregationRule": map[string]any{"clusterRoleSelectors": []any{
			map[string]any{"matchLabels": map[string]any{"open-cluster-management.io/aggregate-to-work": "true"}},
		}},
	}}
	if err := applyObjects(ctx, c, append(objs, aggregate), nil); err != nil {
		return fmt.Errorf("%s: klusterlet RBAC: %w", cluster, err)
	}
	return nil
}

func withoutRemovals(m map[string]string) map[string]string {
	for k := range m {
		if strings.HasSuffix(k, "-") {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// isNodeRuntimeDir reports whether path is one of the folders of a node (<cluster>/node/) that
// its containerd and kubelet fill while they run: image snapshots, pod volumes and logs, which
// come and go under a walk and hold no kubeconfig the fleet wrote. The kubelet's own kubeconfig
// is beside them, in kubelet/.
func isNodeRuntimeDir(path string) bool {
	for _, dir := range []string{"containerd", "podlogs", "ns", filepath.Join("kubelet", "root")} {
		if strings.HasSuffix(path, string(filepath.Separator)+filepath.Join("node", dir)) {
			return true
		}
	}
	return false
}

// Identities returns, for every kubeconfig the fleet wrote (path relative to the run
// directory), the user and groups of its client certificate.
func (f *Fleet) Identities() (map[string]x509Identity, error) {
	out := map[string]x509Identity{}
	err := filepath.WalkDir(f.dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path != f.dir {
			// Removed between its folder's listing and its reading: the fleet's kubeconfigs
			// stay until Stop, so this was one of the nodes' runtime files. A run folder that
			// is gone is an error: it would read as a fleet with no privileged kubeconfig.
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if isNodeRuntimeDir(path) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".kubeconfig") && filepath.Base(path) != "kubeconfig" {
			return nil
		}
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, auth := range cfg.AuthInfos {
			block, _ := pem.Decode(auth.ClientCertificateData)
			if block == nil {
				continue
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			rel, _ := filepath.Rel(f.dir, path)
			out[rel] = x509Identity{User: cert.Subject.CommonName, Groups: cert.Subject.Organization}
		}
		return nil
	})
	return out, err
}

// PrivilegedKubeconfigs lists the kubeconfigs the fleet wrote for its components (every one but
// the admin kubeconfigs, the person running the fleet) that authenticate in system:masters,
// which no component of a real install does. Empty is the rule.
func (f *Fleet) PrivilegedKubeconfigs() ([]string, error) {
	ids, err := f.Identities()
	if err != nil {
		return nil, err
	}
	var out []string
	for path, id := range ids {
		if slices.Contains(id.Groups, "system:masters") && filepath.Base(path) != "admin.kubeconfig" {
			out = append(out, path+" ("+id.User+")")
		}
	}
	slices.Sort(out)
	return out, nil
}

// x509Identity is who a client certificate authenticates as.
type x509Identity struct {
	User   string
	Groups []string
}
