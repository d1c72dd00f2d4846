package spoke

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
)

func TestApplyConfigMapData(t *testing.T) {
	tpl := build(t, addon.ModeManaged)
	ms := tpl.Spec.AgentSpec.Workload.Manifests
	before := map[string]map[string]string{}
	for _, o := range render(t, tpl, testValues()) {
		if o.GetKind() == "ConfigMap" {
			before[o.GetName()], _, _ = unstructured.NestedStringMap(o.Object, "data")
		}
	}
	if len(before[ArgoCDSSHKnownHosts][SSHKnownHostsKey]) == 0 {
		t.Fatalf("the install has no known hosts list: %v", before[ArgoCDSSHKnownHosts])
	}
	err := ApplyConfigMapData(ms, map[string]map[string]string{
		ArgoCDCM:            {"timeout.reconciliation": "90s", "resource.exclusions": "- apiGroups: [cilium.io]\n  kinds: [CiliumIdentity]\n  clusters: ['*']\n"},
		ArgoCDTLSCertsCM:    {"git.example.com": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
		ArgoCDSSHKnownHosts: {SSHKnownHostsKey: "git.example.com ssh-ed25519 AAAA\n"},
	})
	if err != nil {
		t.Fatal(err)
	}
	after := map[string]map[string]string{}
	for _, o := range render(t, tpl, testValues()) {
		if o.GetKind() == "ConfigMap" {
			after[o.GetName()], _, _ = unstructured.NestedStringMap(o.Object, "data")
		}
	}
	if after[ArgoCDCM]["timeout.reconciliation"] != "90s" || !strings.Contains(after[ArgoCDCM]["resource.exclusions"], "CiliumIdentity") {
		t.Errorf("argocd-cm %v", after[ArgoCDCM])
	}
	for k, v := range before[ArgoCDCM] {
		if k != "resource.exclusions" && after[ArgoCDCM][k] != v {
			t.Errorf("argocd-cm key %s the hub did not set changed: %q -> %q", k, v, after[ArgoCDCM][k])
		}
	}
	if !strings.HasPrefix(after[ArgoCDTLSCertsCM]["git.example.com"], "-----BEGIN CERTIFICATE-----") {
		t.Errorf("argocd-tls-certs-cm %v", after[ArgoCDTLSCertsCM])
	}
	if after[ArgoCDSSHKnownHosts][SSHKnownHostsKey] != "git.example.com ssh-ed25519 AAAA\n" {
		t.Errorf("known hosts %q", after[ArgoCDSSHKnownHosts][SSHKnownHostsKey])
	}

	// Refused before anything reaches a cluster: a key the API server would refuse, a
	// ConfigMap the components do not install.
	if err := ApplyConfigMapData(ms, map[string]map[string]string{ArgoCDCM: {"bad key/": "x"}}); err == nil || !strings.Contains(err.Error(), `"bad key/"`) {
		t.Errorf("bad key: %v", err)
	}
	if err := ApplyConfigMapData(ms, map[string]map[string]string{"argocd-notifications-cm": {"a": "b"}}); err == nil || !strings.Contains(err.Error(), "argocd-notifications-cm") {
		t.Errorf("unknown ConfigMap: %v", err)
	}
}
