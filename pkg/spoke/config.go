package spoke

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	workv1 "open-cluster-management.io/api/work/v1"
)

// ConfigMaps whose keys a GitOpsCluster may set, and the key of the SSH known hosts.
const (
	ArgoCDCM            = "argocd-cm"
	ArgoCDCmdParamsCM   = "argocd-cmd-params-cm"
	ArgoCDRBACCM        = "argocd-rbac-cm"
	ArgoCDTLSCertsCM    = "argocd-tls-certs-cm"
	ArgoCDSSHKnownHosts = "argocd-ssh-known-hosts-cm"
	SSHKnownHostsKey    = "ssh_known_hosts"
)

// ApplyConfigMapData sets keys of the Argo CD ConfigMaps among manifests (by ConfigMap name),
// in place: the keys given replace the install's, the others stay. A key that is not a valid
// ConfigMap key, or a ConfigMap the components do not install, is refused before anything
// reaches a cluster (where the work agent would fail to apply it).
func ApplyConfigMapData(manifests []workv1.Manifest, data map[string]map[string]string) error {
	if len(data) == 0 {
		return nil
	}
	var problems []string
	for cm, kv := range data {
		for k := range kv {
			if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
				problems = append(problems, fmt.Sprintf("%s key %q: %s", cm, k, strings.Join(errs, "; ")))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("invalid Argo CD configuration: %s", strings.Join(problems, ", "))
	}
	done := map[string]bool{}
	for i := range manifests {
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(manifests[i].Raw); err != nil {
			return err
		}
		kv, ok := data[o.GetName()]
		if o.GetKind() != "ConfigMap" || !ok || len(kv) == 0 {
			continue
		}
		cur, _, _ := unstructured.NestedStringMap(o.Object, "data")
		if cur == nil {
			cur = map[string]string{}
		}
		for k, v := range kv {
			cur[k] = v
		}
		if err := unstructured.SetNestedStringMap(o.Object, cur, "data"); err != nil {
			return err
		}
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		manifests[i].Raw = raw
		done[o.GetName()] = true
	}
	for cm, kv := range data {
		if len(kv) > 0 && !done[cm] {
			return fmt.Errorf("invalid Argo CD configuration: the components install no ConfigMap %s", cm)
		}
	}
	return nil
}
