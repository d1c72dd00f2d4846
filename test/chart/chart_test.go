// Package chart tests the Helm chart with Helm's Go SDK: lint, rendering, the values schema,
// and a real install into a kube-apiserver whose RBAC is then shown to be enough for the
// manager, and no more.
package chart

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/strvals"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

const (
	releaseName = "argocd-agent-addon"
	releaseNS   = "open-cluster-management"
	signerName  = "open-cluster-management.io/argocd-agent-addon"
	addonName   = "argocd-agent-addon"
)

func chartDir() string { return filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon") }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir())
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// render returns the chart's objects for the values, as a client-only dry-run install.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.GetKind()]++
	}
	return out
}

func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":      {},
		"everything on": {"replicas": 2, "defaults": map[string]any{"create": true}, "principal": map[string]any{"install": true}, "metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}}},
	} {
		res := action.NewLint().Run([]string{chartDir()}, vals)
		for _, m := range res.Messages {
			if m.Severity >= support.ErrorSev {
				t.Errorf("%s: lint: %s", name, m)
			}
		}
		if len(res.Errors) > 0 {
			t.Errorf("%s: lint errors: %v", name, res.Errors)
		}
	}
}

func TestRenderDefaults(t *testing.T) {
	objs, err := render(t, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(objs)
	if k["PodDisruptionBudget"] != 0 || k["Placement"] != 0 || k["GitOpsCluster"] != 0 || k["ServiceMonitor"] != 0 {
		t.Errorf("optional objects rendered by default: %v", k)
	}
	dep := find(objs, "Deployment", releaseName)
	if dep == nil {
		t.Fatal("no manager Deployment")
	}
	c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	container := c[0].(map[string]any)
	sc := container["securityContext"].(map[string]any)
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false || sc["runAsNonRoot"] != true {
		t.Errorf("container securityContext = %v", sc)
	}
	if drop := sc["capabilities"].(map[string]any)["drop"].([]any); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("capabilities.drop = %v", drop)
	}
	if sp := sc["seccompProfile"].(map[string]any); sp["type"] != "RuntimeDefault" {
		t.Errorf("seccompProfile = %v", sp)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if container[probe] == nil {
			t.Errorf("no %s", probe)
		}
	}
	args := fmt.Sprint(container["args"])
	for _, want := range []string{"--leader-elect=true", "--managed-namespaces=" + releaseNS, "--signer-name=" + signerName} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %s lack %s", args, want)
		}
	}
	for _, want := range []string{"--metrics-bind-address=:8443", "--metrics-secure=true", "--gitopscluster-concurrency=1", "--signer-concurrency=64", "--pull-model=true",
		"--leader-elect-lease-duration=137s", "--leader-elect-renew-deadline=107s", "--leader-elect-retry-period=26s"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %s lack %s", args, want)
		}
	}
	for _, unwanted := range []string{"--pprof-bind-address", "--metrics-cert-dir"} {
		if strings.Contains(args, unwanted) {
			t.Errorf("manager args %s have %s by default", args, unwanted)
		}
	}
	svc := find(objs, "Service", releaseName+"-metrics")
	if svc == nil {
		t.Fatal("no metrics Service")
	}
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if p := ports[0].(map[string]any); fmt.Sprint(p["port"]) != "8443" || p["appProtocol"] != "https" {
		t.Errorf("metrics Service port = %v, want 8443 https", p)
	}
	// The manager checks /metrics callers with TokenReviews and SubjectAccessReviews; one rule
	// each.
	mgrRole := clusterRole(t, objs, releaseName)
	if n := countRules(mgrRole, "authentication.k8s.io", "tokenreviews", "create"); n != 1 {
		t.Errorf("manager ClusterRole: %d rules with create on tokenreviews, want 1", n)
	}
	if n := countRules(mgrRole, "authorization.k8s.io", "subjectaccessreviews", "create"); n != 1 {
		t.Errorf("manager ClusterRole: %d rules with create on subjectaccessreviews, want 1", n)
	}
	reader := clusterRole(t, objs, releaseName+"-metrics-reader")
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics-reader rules = %+v, want get on /metrics only", reader.Rules)
	}
	if find(objs, "ClusterRoleBinding", releaseName+"-metrics-reader") != nil {
		t.Error("the metrics-reader ClusterRole is bound without metrics.readerSubjects")
	}
	assertLeastPrivilege(t, objs)
}

// clusterRole returns the rendered ClusterRole name, typed.
func clusterRole(t *testing.T, objs []*unstructured.Unstructured, name string) *rbacv1.ClusterRole {
	t.Helper()
	o := find(objs, "ClusterRole", name)
	if o == nil {
		t.Fatalf("no ClusterRole %s", name)
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role); err != nil {
		t.Fatal(err)
	}
	return role
}

// countRules counts the rules granting verb on resource in group.
func countRules(role *rbacv1.ClusterRole, group, resource, verb string) int {
	n := 0
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			n++
		}
	}
	return n
}

// managerArgs returns the manager container's arguments.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	dep := find(objs, "Deployment", releaseName)
	if dep == nil {
		t.Fatal("no manager Deployment")
	}
	return principalArgs(t, dep)
}

func TestRenderMetricsAndOperations(t *testing.T) {
	endpoint := func(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
		t.Helper()
		sm := find(objs, "ServiceMonitor", releaseName)
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		return eps[0].(map[string]any)
	}
	monitor := map[string]any{"serviceMonitor": map[string]any{"enabled": true}}

	t.Run("self-signed", func(t *testing.T) {
		objs, err := render(t, map[string]any{"metrics": monitor})
		if err != nil {
			t.Fatal(err)
		}
		ep := endpoint(t, objs)
		if ep["scheme"] != "https" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
			t.Errorf("ServiceMonitor endpoint = %v, want https with Prometheus's token", ep)
		}
		if tc := ep["tlsConfig"].(map[string]any); tc["insecureSkipVerify"] != true {
			t.Errorf("tlsConfig = %v, want insecureSkipVerify for the self-signed certificate", tc)
		}
	})

	t.Run("certificate from a Secret", func(t *testing.T) {
		objs, err := render(t, map[string]any{"metrics": map[string]any{"certSecret": "metrics-tls", "serviceMonitor": map[string]any{"enabled": true}}})
		if err != nil {
			t.Fatal(err)
		}
		if args := managerArgs(t, objs); !slices.Contains(args, "--metrics-cert-dir=/etc/metrics-certs") {
			t.Errorf("manager args %v lack the certificate folder", args)
		}
		dep := find(objs, "Deployment", releaseName)
		vols, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "volumes")
		if len(vols) != 1 || fmt.Sprint(vols[0].(map[string]any)["secret"].(map[string]any)["secretName"]) != "metrics-tls" {
			t.Errorf("volumes = %v", vols)
		}
		c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		mounts := c[0].(map[string]any)["volumeMounts"].([]any)
		if m := mounts[0].(map[string]any); m["mountPath"] != "/etc/metrics-certs" || m["readOnly"] != true {
			t.Errorf("volumeMounts = %v", mounts)
		}
		tc := endpoint(t, objs)["tlsConfig"].(map[string]any)
		if tc["insecureSkipVerify"] != nil || tc["serverName"] != releaseName+"-metrics."+releaseNS+".svc" || fmt.Sprint(tc["ca"]) != "map[secret:map[key:ca.crt name:metrics-tls]]" {
			t.Errorf("tlsConfig = %v, want verification against the Secret's CA", tc)
		}
	})

	t.Run("own tlsConfig", func(t *testing.T) {
		objs, err := render(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "tlsConfig": map[string]any{"serverName": "m.example.com"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if tc := endpoint(t, objs)["tlsConfig"].(map[string]any); len(tc) != 1 || tc["serverName"] != "m.example.com" {
			t.Errorf("tlsConfig = %v", tc)
		}
	})

	t.Run("reader subjects", func(t *testing.T) {
		subject := map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
		objs, err := render(t, map[string]any{"metrics": map[string]any{"readerSubjects": []any{subject}}})
		if err != nil {
			t.Fatal(err)
		}
		b := find(objs, "ClusterRoleBinding", releaseName+"-metrics-reader")
		if b == nil {
			t.Fatal("no metrics-reader ClusterRoleBinding")
		}
		var crb rbacv1.ClusterRoleBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &crb); err != nil {
			t.Fatal(err)
		}
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}
		if crb.RoleRef.Name != releaseName+"-metrics-reader" || !slices.Equal(crb.Subjects, want) {
			t.Errorf("ClusterRoleBinding = %+v", crb)
		}
		assertLeastPrivilege(t, objs)
	})

	t.Run("insecure", func(t *testing.T) {
		objs, err := render(t, map[string]any{"metrics": map[string]any{"secure": false, "port": 8080, "serviceMonitor": map[string]any{"enabled": true}}})
		if err != nil {
			t.Fatal(err)
		}
		if ep := endpoint(t, objs); ep["scheme"] != "http" || ep["bearerTokenFile"] != nil || ep["tlsConfig"] != nil {
			t.Errorf("ServiceMonitor endpoint = %v, want plain http", ep)
		}
		if args := managerArgs(t, objs); !slices.Contains(args, "--metrics-secure=false") || !slices.Contains(args, "--metrics-bind-address=:8080") {
			t.Errorf("manager args %v", args)
		}
		if find(objs, "ClusterRole", releaseName+"-metrics-reader") != nil {
			t.Error("metrics-reader ClusterRole rendered for open metrics")
		}
		if n := countRules(clusterRole(t, objs, releaseName), "authentication.k8s.io", "tokenreviews", "create"); n != 0 {
			t.Error("TokenReviews granted although metrics are not authenticated")
		}
	})

	t.Run("pull model off", func(t *testing.T) {
		objs, err := render(t, map[string]any{"pullModel": map[string]any{"enabled": false, "concurrency": 2}})
		if err != nil {
			t.Fatal(err)
		}
		args := managerArgs(t, objs)
		for _, want := range []string{"--pull-model=false", "--pull-model-concurrency=2"} {
			if !slices.Contains(args, want) {
				t.Errorf("manager args %v lack %s", args, want)
			}
		}
		// Without the pull model only the Argo CD probes are ManifestWorks: created and deleted,
		// never changed.
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				if !strings.Contains(fmt.Sprint(rule["resources"]), "manifestworks") {
					continue
				}
				if verbs := fmt.Sprint(rule["verbs"]); strings.Contains(verbs, "update") || strings.Contains(verbs, "patch") {
					t.Errorf("ClusterRole %s may change ManifestWorks with the pull model off: %v", o.GetName(), verbs)
				}
			}
		}
	})

	t.Run("pprof, concurrency and leader election", func(t *testing.T) {
		objs, err := render(t, map[string]any{
			"pprof":                map[string]any{"port": 6060},
			"concurrency":          map[string]any{"gitOpsCluster": 2, "signer": 8},
			"leaderElectionTiming": map[string]any{"leaseDuration": "60s", "renewDeadline": "40s", "retryPeriod": "5s"},
		})
		if err != nil {
			t.Fatal(err)
		}
		args := managerArgs(t, objs)
		for _, want := range []string{"--pprof-bind-address=127.0.0.1:6060", "--gitopscluster-concurrency=2", "--signer-concurrency=8",
			"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=5s"} {
			if !slices.Contains(args, want) {
				t.Errorf("manager args %v lack %s", args, want)
			}
		}
	})
}

// assertLeastPrivilege checks the rendered RBAC: no wildcards, Secrets only through Roles,
// signer verbs only on our signer, no RBAC-escalation rights.
func assertLeastPrivilege(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		var role rbacv1.ClusterRole
		raw, _ := yaml.Marshal(o.Object)
		if err := yaml.Unmarshal(raw, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if len(r.NonResourceURLs) > 0 && (o.GetName() != releaseName+"-metrics-reader" || !slices.Equal(r.NonResourceURLs, []string{"/metrics"}) || !slices.Equal(r.Verbs, []string{"get"})) {
				t.Errorf("%s %s grants non-resource URLs beyond get /metrics in the metrics reader: %+v", o.GetKind(), o.GetName(), r)
			}
			all := append(append(append(append([]string{}, r.NonResourceURLs...), r.Verbs...), r.Resources...), r.APIGroups...)
			for _, v := range all {
				if v == "*" {
					t.Errorf("%s %s has a wildcard rule %+v", o.GetKind(), o.GetName(), r)
				}
			}
			for _, res := range r.Resources {
				if o.GetKind() == "ClusterRole" && res == "secrets" && strings.HasPrefix(o.GetName(), releaseName) && !strings.HasSuffix(o.GetName(), "-principal") {
					t.Errorf("the manager's ClusterRole grants Secrets cluster-wide")
				}
				if res == "signers" && (len(r.ResourceNames) != 1 || r.ResourceNames[0] != signerName) {
					t.Errorf("signer rule not limited to %s: %+v", signerName, r)
				}
				if strings.HasPrefix(res, "clusterrole") || strings.HasPrefix(res, "role") {
					t.Errorf("%s %s grants RBAC objects: %+v", o.GetKind(), o.GetName(), r)
				}
			}
			for _, v := range r.Verbs {
				if v == "escalate" || v == "bind" || v == "impersonate" {
					t.Errorf("%s %s grants %s", o.GetKind(), o.GetName(), v)
				}
			}
		}
	}
}

func TestRenderNonDefaults(t *testing.T) {
	objs, err := render(t, map[string]any{
		"replicas":          2,
		"managedNamespaces": []any{"argocd", "team-a"},
		"image":             map[string]any{"repository": "registry.example/addon", "tag": "v9"},
		"imagePullSecrets":  []any{map[string]any{"name": "pull"}},
		"defaults":          map[string]any{"create": true, "gitOpsCluster": map[string]any{"principalServerAddress": "p.example.com", "principalServerPort": "443"}},
		"principal":         map[string]any{"install": true},
		"metrics":           map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(objs)
	if k["PodDisruptionBudget"] != 1 || k["Placement"] != 1 || k["ManagedClusterSetBinding"] != 1 || k["GitOpsCluster"] != 1 || k["ServiceMonitor"] != 1 {
		t.Errorf("kinds = %v", k)
	}
	roles := 0
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetName() == releaseName {
			roles++
		}
	}
	// The two listed, and the principal's (the release namespace here), which the chart's
	// principal and default GitOpsCluster use.
	if roles != 3 {
		t.Errorf("want a Secrets Role in each of the 3 managed namespaces, got %d", roles)
	}
	dep := find(objs, "Deployment", releaseName)
	img, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if img[0].(map[string]any)["image"] != "registry.example/addon:v9" {
		t.Errorf("image = %v", img[0].(map[string]any)["image"])
	}
	if !strings.Contains(fmt.Sprint(img[0].(map[string]any)["args"]), "--reloader-image=registry.example/addon:v9") {
		t.Error("the agents' reloader image is not the manager's image")
	}
	// The principal authenticates agents with the same regular expression the signer's
	// principal-side test uses.
	p := find(objs, "Deployment", "argocd-agent-principal")
	if p == nil {
		t.Fatal("no principal Deployment")
	}
	pc, _, _ := unstructured.NestedSlice(p.Object, "spec", "template", "spec", "containers")
	want := "--auth=mtls:subject:" + signer.PrincipalAuthSubjectRegex(addonName)
	if !strings.Contains(fmt.Sprint(pc[0].(map[string]any)["args"]), want) {
		t.Errorf("principal args %v lack %s", pc[0].(map[string]any)["args"], want)
	}
	// Without allowed namespaces the principal forwards no Application to any agent.
	if !slices.Contains(principalArgs(t, p), "--allowed-namespaces=*") {
		t.Errorf("principal args %v do not allow the clusters' namespaces", principalArgs(t, p))
	}
	goc := find(objs, "GitOpsCluster", "")
	if addr, _, _ := unstructured.NestedString(goc.Object, "spec", "argoCDAgentAddon", "principalServerAddress"); addr != "p.example.com" {
		t.Errorf("default GitOpsCluster address = %q", addr)
	}
	assertLeastPrivilege(t, objs)
}

func TestSchemaRejectsBadValues(t *testing.T) {
	for name, tc := range map[string]struct {
		vals map[string]any
		want string
	}{
		"replicas as a string":            {map[string]any{"replicas": "two"}, "replicas"},
		"zero replicas":                   {map[string]any{"replicas": 0}, "replicas"},
		"unknown log level":               {map[string]any{"logLevel": "verbose"}, "logLevel"},
		"unknown mode":                    {map[string]any{"defaults": map[string]any{"gitOpsCluster": map[string]any{"mode": "pull"}}}, "mode"},
		"unknown top-level value":         {map[string]any{"replica": 2}, "replica"},
		"bad pull policy":                 {map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
		"bad namespace":                   {map[string]any{"managedNamespaces": []any{"Not_A_Label"}}, "managedNamespaces"},
		"bad duration":                    {map[string]any{"signer": map[string]any{"certificateValidity": "a week"}}, "certificateValidity"},
		"bad service type":                {map[string]any{"principal": map[string]any{"service": map[string]any{"type": "Ingress"}}}, "type"},
		"no allowed namespaces":           {map[string]any{"principal": map[string]any{"allowedNamespaces": []any{}}}, "allowedNamespaces"},
		"reader of unknown kind":          {map[string]any{"metrics": map[string]any{"readerSubjects": []any{map[string]any{"kind": "Pod", "name": "p"}}}}, "kind"},
		"reader SA, no namespace":         {map[string]any{"metrics": map[string]any{"readerSubjects": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus"}}}}, "namespace"},
		"zero signer workers":             {map[string]any{"concurrency": map[string]any{"signer": 0}}, "signer"},
		"pprof port as a string":          {map[string]any{"pprof": map[string]any{"port": "6060"}}, "port"},
		"bad lease duration":              {map[string]any{"leaderElectionTiming": map[string]any{"leaseDuration": "15"}}, "leaseDuration"},
		"secure as a string":              {map[string]any{"metrics": map[string]any{"secure": "yes"}}, "secure"},
		"destination mapping as a string": {map[string]any{"principal": map[string]any{"destinationBasedMapping": "true"}}, "destinationBasedMapping"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render(t, tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a schema error about %s, got %v", tc.want, err)
			}
		})
	}
}

// helmConfig points Helm's actions at the test API server, storing releases as Secrets.
func helmConfig(t *testing.T, kubeconfig string) *action.Configuration {
	t.Helper()
	ac, err := chartrender.Config(kubeconfig, releaseNS, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

func TestInstallUpgradeUninstallOnARealAPIServer(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	admin := env.Client
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{releaseNS, "elsewhere", "cluster1", "monitoring"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	// helm install, with the optional principal so discovery has a Service to read.
	ac := helmConfig(t, kubeconfig)
	install := action.NewInstall(ac)
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	install.Timeout = time.Minute
	prometheus := map[string]any{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}
	if _, err := install.Run(loadChart(t), map[string]any{"principal": map[string]any{"install": true},
		"metrics": map[string]any{"readerSubjects": []any{prometheus}}}); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if err := admin.Get(ctx, types.NamespacedName{Name: "gitopsclusters.apps.open-cluster-management.io"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}); err != nil {
		t.Fatalf("the chart did not install the CRD: %v", err)
	}
	waitFor(t, "GitOpsCluster API served", func() error {
		return admin.List(ctx, &v1alpha1.GitOpsClusterList{})
	})

	// The hub side a user has: a cluster, a Placement with its decision, a Ready node for
	// NodePort discovery, and the README's GitOpsCluster.
	if err := admin.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "argocd-placement"}}); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.SetDecisionPage(ctx, admin, releaseNS, "argocd-placement", 1, []string{"cluster1"}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hub-node"}}
	if err := admin.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}
	if err := admin.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "my-gitops-cluster"},
		Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "argocd-placement"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged}}}
	if err := admin.Create(ctx, goc); err != nil {
		t.Fatal(err)
	}
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: addonName}}
	if err := admin.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Test", Message: "stands in for OCM"})
	if err := admin.Status().Update(ctx, mca); err != nil {
		t.Fatal(err)
	}

	// The manager, run out of cluster as the chart's ServiceAccount.
	asSA := testenv.ServiceAccount(releaseNS, releaseName).Impersonating(env.Config)
	watches := &watchRecorder{}
	asSA.Wrap(watches.wrap)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	opts := manager.DefaultOptions()
	// Metrics as the chart serves them: HTTPS, callers checked through the API server.
	metricsAddr, healthAddr := freeAddr(t), freeAddr(t)
	opts.MetricsAddr, opts.HealthProbeAddr = metricsAddr, healthAddr
	opts.Fleet.ManagedNamespaces = []string{releaseNS}
	opts.Fleet.ReloaderImage = "argocd-agent-addon:test"
	go func() { done <- manager.Run(mctx, asSA, opts) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	// Ready means what the chart's readiness probe tells Kubernetes: every informer the
	// controllers use has synced. A controller that opened a watch after that would have
	// started its work on a cache still filling (at 10,000 clusters, seconds of it).
	waitFor(t, "manager ready", func() error {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	})
	readyAt := time.Now()
	defer func() {
		if late := watches.firstOpenedAfter(readyAt); len(late) > 0 {
			t.Errorf("watches first opened after the manager reported ready: %v", late)
		}
	}()

	waitFor(t, "GitOpsCluster Ready with the chart's RBAC", func() error {
		g := &v1alpha1.GitOpsCluster{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(goc), g); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) {
			return fmt.Errorf("conditions: %+v", g.Status.Conditions)
		}
		return nil
	})

	// The chart's RBAC lets the manager review scrapers' tokens and rights, and its
	// metrics-reader binding lets Prometheus's ServiceAccount in; another one is refused.
	cs := kubernetes.NewForConfigOrDie(env.Config)
	promToken := serviceAccountToken(t, cs, "monitoring", "prometheus")
	waitFor(t, "metrics served to the ServiceAccount bound through metrics.readerSubjects", func() error {
		return scrape("https://"+metricsAddr+"/metrics", promToken, http.StatusOK)
	})
	if err := scrape("https://"+metricsAddr+"/metrics", serviceAccountToken(t, cs, "monitoring", "someone-else"), http.StatusForbidden); err != nil {
		t.Errorf("a ServiceAccount not bound to the metrics reader: %v", err)
	}
	if err := scrape("https://"+metricsAddr+"/metrics", "", http.StatusUnauthorized); err != nil {
		t.Errorf("no token: %v", err)
	}

	// An agent CSR as cluster1's registration agent makes it (OCM's hub grants cluster agents
	// the right to create CSRs; the test grants the same): the signer may approve and sign.
	grantCSRCreate(t, admin, "cluster1")
	csrName := createAgentCSR(t, env.Config, "cluster1")
	waitFor(t, "agent CSR signed by the manager running as the chart's identity", func() error {
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, csrName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(csr.Status.Certificate) == 0 {
			return fmt.Errorf("not signed; conditions %+v", csr.Status.Conditions)
		}
		return nil
	})

	// ...and no more: as the same identity these are forbidden.
	saClient := kubernetes.NewForConfigOrDie(asSA)
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "private"}, StringData: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := saClient.CoreV1().Secrets("elsewhere").Get(ctx, "private", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("reading a Secret outside the managed namespaces: want Forbidden, got %v", err)
	}
	if _, err := saClient.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets cluster-wide: want Forbidden, got %v", err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: releaseName, Namespace: releaseNS}}}
	if _, err := saClient.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("creating a ClusterRoleBinding: want Forbidden, got %v", err)
	}
	other := otherSignerCSR(t, cs)
	other.Status.Conditions = append(other.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"})
	if _, err := saClient.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, other.Name, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("approving a CSR for another signer: want Forbidden, got %v", err)
	}

	// helm upgrade with changed values keeps GitOpsClusters, the hub CA and issued secrets.
	caBefore := &corev1.Secret{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "argocd-agent-ca"}, caBefore); err != nil {
		t.Fatal(err)
	}
	upgrade := action.NewUpgrade(ac)
	upgrade.Namespace = releaseNS
	if _, err := upgrade.Run(releaseName, loadChart(t), map[string]any{"principal": map[string]any{"install": true}, "logLevel": "debug", "replicas": 2}); err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	caAfter := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(caBefore), caAfter); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(caBefore.Data["tls.crt"], caAfter.Data["tls.crt"]) {
		t.Error("helm upgrade replaced the hub CA")
	}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "cluster-cluster1"}, &corev1.Secret{}); err != nil {
		t.Errorf("helm upgrade lost the agent's cluster secret: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(goc), &v1alpha1.GitOpsCluster{}); err != nil {
		t.Errorf("helm upgrade lost the GitOpsCluster: %v", err)
	}

	// helm uninstall leaves the CRD and the users' GitOpsClusters, as Helm does for crds/.
	cancel()
	<-done
	done <- nil
	if _, err := action.NewUninstall(ac).Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(goc), &v1alpha1.GitOpsCluster{}); err != nil {
		t.Errorf("helm uninstall removed the GitOpsCluster or its CRD: %v", err)
	}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: releaseName}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("helm uninstall left the ServiceAccount: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// serviceAccountToken creates a ServiceAccount and returns a token for it from the
// TokenRequest API, as the kubelet mounts one into Prometheus's pod.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape GETs url with the bearer token (none if empty) and fails unless it answers want. The
// manager's certificate is self-signed, as with the chart's defaults.
func scrape(url, token string, want int) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("want %d, got %s: %.300s", want, resp.Status, body)
	}
	return nil
}

func waitFor(t *testing.T, what string, check func() error) {
	t.Helper()
	poll.Until(t, what, 60*time.Second, check)
}

// createAgentCSR asks for an agent certificate exactly as OCM's registration agent on cluster
// does: its own identity, OCM's labels, subject and DNS name.
func createAgentCSR(t *testing.T, cfg *rest.Config, cluster string) string {
	t.Helper()
	csr, err := testenv.AgentCSR(cluster, cluster, addonName, signerName)
	if err != nil {
		t.Fatal(err)
	}
	created, err := kubernetes.NewForConfigOrDie(testenv.Agent(cluster).Impersonating(cfg)).CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created.Name
}

func otherSignerCSR(t *testing.T, cs kubernetes.Interface) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "someone"}}, key)
	csr, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "other-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/other", Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func grantCSRCreate(t *testing.T, admin client.Client, cluster string) {
	t.Helper()
	if err := testenv.GrantCSRCreate(context.Background(), admin, cluster); err != nil {
		t.Fatal(err)
	}
}

// principalArgs returns the principal container's arguments.
func principalArgs(t *testing.T, p *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(p.Object, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// The chart's principal routes Applications by spec.destination.name only when
// principal.destinationBasedMapping is set, and the chart's own managed GitOpsCluster then asks
// for the same mapping on its agents (argocd-agent needs the flag on both ends).
func TestRenderPrincipalDestinationBasedMapping(t *testing.T) {
	const flag = "--destination-based-mapping=true"
	for _, tc := range []struct {
		name        string
		dbm         bool
		mode        string
		wantMapping string
	}{
		{"off", false, "managed", ""},
		{"on, managed", true, "managed", "Destination"},
		{"on, autonomous", true, "autonomous", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := render(t, map[string]any{
				"principal": map[string]any{"install": true, "destinationBasedMapping": tc.dbm},
				"defaults":  map[string]any{"create": true, "gitOpsCluster": map[string]any{"mode": tc.mode}},
			})
			if err != nil {
				t.Fatal(err)
			}
			p := find(objs, "Deployment", "argocd-agent-principal")
			if p == nil {
				t.Fatal("no principal Deployment")
			}
			args := principalArgs(t, p)
			mentions := slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "destination-based-mapping") })
			if tc.dbm && !slices.Contains(args, flag) {
				t.Errorf("principal args %v lack %s", args, flag)
			}
			if !tc.dbm && mentions {
				t.Errorf("principal args %v name destination-based mapping without the value", args)
			}
			goc := find(objs, "GitOpsCluster", "")
			got, _, _ := unstructured.NestedString(goc.Object, "spec", "argoCDAgentAddon", "applicationMapping")
			if got != tc.wantMapping {
				t.Errorf("default GitOpsCluster applicationMapping = %q, want %q", got, tc.wantMapping)
			}
		})
	}
	// Without the chart's principal the value names no principal of ours: the GitOpsCluster
	// keeps namespace mapping.
	objs, err := render(t, map[string]any{
		"principal": map[string]any{"destinationBasedMapping": true},
		"defaults":  map[string]any{"create": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(find(objs, "GitOpsCluster", "").Object, "spec", "argoCDAgentAddon", "applicationMapping"); got != "" {
		t.Errorf("without principal.install, default GitOpsCluster applicationMapping = %q", got)
	}
}

// cert-manager's kinds appear in the manager's RBAC only when certManager.enabled is set:
// Certificates and Issuers in the managed namespaces, ClusterIssuers read-only.
func TestRenderCertManagerRBACOnlyWhenEnabled(t *testing.T) {
	grants := func(vals map[string]any) map[string][]string {
		objs, err := render(t, vals)
		if err != nil {
			t.Fatal(err)
		}
		assertLeastPrivilege(t, objs)
		out := map[string][]string{}
		for _, o := range objs {
			if (o.GetKind() != "ClusterRole" && o.GetKind() != "Role") || o.GetName() != releaseName {
				continue
			}
			var role rbacv1.ClusterRole
			raw, _ := yaml.Marshal(o.Object)
			if err := yaml.Unmarshal(raw, &role); err != nil {
				t.Fatal(err)
			}
			for _, r := range role.Rules {
				if slices.Contains(r.APIGroups, "cert-manager.io") {
					for _, res := range r.Resources {
						key := o.GetKind() + "/" + o.GetNamespace() + "/" + res
						out[key] = append(out[key], r.Verbs...)
					}
				}
			}
		}
		return out
	}
	if got := grants(map[string]any{}); len(got) != 0 {
		t.Errorf("cert-manager grants by default: %v", got)
	}
	got := grants(map[string]any{"certManager": map[string]any{"enabled": true}, "managedNamespaces": []any{"argocd", "team-a"}})
	want := map[string][]string{
		"ClusterRole//clusterissuers": {"get"},
		"Role/argocd/certificates":    {"get", "create", "update", "delete"},
		"Role/argocd/issuers":         {"get"},
		"Role/team-a/certificates":    {"get", "create", "update", "delete"},
		"Role/team-a/issuers":         {"get"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("cert-manager grants = %v, want %v", got, want)
	}
}

// TestChartDefaultsAreTheBinarys: every flag of the manager is settable through the chart (a
// typed value passed on every install, or one passed only when given), and every value the
// chart passes by default is the binary's own default, so the chart and the docs (which
// document the binary's) never disagree (a certificate lifetime above all: argocd-agent v0.9.0
// cannot recall a certificate before it expires). extraArgs come last.
func TestChartDefaultsAreTheBinarys(t *testing.T) {
	// Flags the chart passes only when their value is given, or sets from the release.
	onlyWhenGiven := map[string]string{
		"metrics-cert-dir":             "metrics.certSecret",
		"pprof-bind-address":           "pprof.port",
		"spoke-image-registry":         "spoke.imageRegistry",
		"spoke-image-pull-secrets":     "spoke.imagePullSecrets",
		"cert-manager-allowed-issuers": "certManager.allowedIssuers",
		"pull-model-namespaces":        "pullModel.namespaces",
		"kubeconfig":                   "never: the manager uses its ServiceAccount",
	}
	// Values the chart sets on purpose to something else than the binary's default.
	onPurpose := map[string]string{
		"leader-elect":              "a Deployment may run replicas",
		"leader-election-namespace": "the release namespace",
		"managed-namespaces":        "the release namespace (and the principal's): the binary's empty list means all",
		"reloader-image":            "the chart's own image",
		"pull-model-seal-secret":    "a Secret of the release",
	}
	args := renderedManagerArgs(t, map[string]any{"extraArgs": []any{"--zap-devel=true"}})
	if args[len(args)-1] != "--zap-devel=true" {
		t.Errorf("extraArgs are not last: %v", args)
	}
	manager := managerCommand(t)
	passed := map[string]bool{}
	for _, a := range args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			t.Errorf("argument %q is not --name=value", a)
			continue
		}
		passed[name] = true
		f := manager.Flags().Lookup(name)
		if f == nil {
			t.Errorf("the chart passes --%s, which the binary does not know", name)
			continue
		}
		if _, ok := onPurpose[name]; ok || strings.HasPrefix(name, "zap-") {
			continue
		}
		if err := f.Value.Set(value); err != nil {
			t.Errorf("--%s=%s: the binary refuses the chart's default: %v", name, value, err)
		} else if f.Value.String() != f.DefValue {
			t.Errorf("--%s: the chart's default is %s, the binary's %s", name, value, f.DefValue)
		}
	}
	manager.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := onlyWhenGiven[f.Name]; !ok && !passed[f.Name] && !strings.HasPrefix(f.Name, "zap-") && f.Name != "help" {
			t.Errorf("--%s cannot be set through the chart's values (only extraArgs)", f.Name)
		}
	})
}

func managerCommand(t *testing.T) *cobra.Command {
	t.Helper()
	for _, sub := range cmd.NewRootCommand().Commands() {
		if sub.Name() == "manager" {
			return sub
		}
	}
	t.Fatal("no manager command")
	return nil
}

// renderedManagerArgs renders the chart with vals and returns the manager's arguments.
func renderedManagerArgs(t *testing.T, vals map[string]any) []string {
	t.Helper()
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return managerArgs(t, objs)
}

// TestPrincipalBesideTheHubArgoCD: principal.namespace puts the chart's principal, and the
// chart's default GitOpsCluster, beside the hub's Argo CD (whose redis and Secret it names),
// and gives the manager that namespace's Secrets; without it all stays in the release namespace.
func TestPrincipalBesideTheHubArgoCD(t *testing.T) {
	objs, err := render(t, map[string]any{
		"principal": map[string]any{"install": true, "namespace": "argocd", "redisPasswordSecret": map[string]any{"name": "argocd-redis-ha", "key": "pw"}},
		"defaults":  map[string]any{"create": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "GitOpsCluster", "Placement", "ManagedClusterSetBinding"} {
		for _, o := range objs {
			if o.GetKind() != kind || o.GetName() == releaseName || strings.HasPrefix(o.GetName(), releaseName+"-") {
				continue
			}
			if o.GetNamespace() != "argocd" {
				t.Errorf("%s %s is in namespace %q, not beside the hub's Argo CD", kind, o.GetName(), o.GetNamespace())
			}
		}
	}
	p := find(objs, "Deployment", "argocd-agent-principal")
	c, _, _ := unstructured.NestedSlice(p.Object, "spec", "template", "spec", "containers")
	container := c[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	if !slices.Contains(args, "--namespace=argocd") {
		t.Errorf("principal arguments %v", args)
	}
	env, _, _ := unstructured.NestedSlice(container, "env")
	if ref := fmt.Sprint(env); !strings.Contains(ref, "argocd-redis-ha") || !strings.Contains(ref, "pw") {
		t.Errorf("the principal's redis password is not taken from the given Secret: %v", env)
	}
	margs := renderedManagerArgs(t, map[string]any{"principal": map[string]any{"install": true, "namespace": "argocd"}})
	if !slices.Contains(margs, "--managed-namespaces="+releaseNS+",argocd") {
		t.Errorf("the manager does not manage the principal's namespace: %v", margs)
	}
	roles := 0
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetNamespace() == "argocd" && strings.HasPrefix(o.GetName(), releaseName) {
			roles++
		}
	}
	if roles == 0 {
		t.Error("no Role gives the manager the principal namespace's Secrets")
	}
	margs = renderedManagerArgs(t, map[string]any{"principal": map[string]any{"install": true}})
	if !slices.Contains(margs, "--managed-namespaces="+releaseNS) {
		t.Errorf("without principal.namespace: %v", margs)
	}
}

// TestNotesWarnOfAnImageWithoutRegistry: the default image names no registry, and the same
// image runs beside every agent on every managed cluster; helm install says so at once instead
// of every pod failing to pull it later.
func TestNotesWarnOfAnImageWithoutRegistry(t *testing.T) {
	notes := func(vals map[string]any) string {
		install := action.NewInstall(&action.Configuration{})
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.ReleaseName, install.Namespace = releaseName, releaseNS
		install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.0", Major: "1", Minor: "36"}
		rel, err := install.Run(loadChart(t), vals)
		if err != nil {
			t.Fatal(err)
		}
		return rel.Info.Notes
	}
	if n := notes(map[string]any{}); !strings.Contains(n, "WARNING: image.repository") || !strings.Contains(n, "make image") {
		t.Errorf("default values: no warning in the notes:\n%s", n)
	}
	if n := notes(map[string]any{"image": map[string]any{"repository": "registry.example.com/gitops/argocd-agent-addon"}}); strings.Contains(n, "WARNING") {
		t.Errorf("an image with a registry: warned anyway:\n%s", n)
	}
}

// TestInstallStopsOnAnotherProjectsGitOpsClusterCRD: on a hub where argocd-pull-integration's
// GitOpsCluster CRD holds the name, helm install fails and says why, instead of skipping the
// chart's CRD in silence; an older CRD of this project's does not stop it.
func TestInstallStopsOnAnotherProjectsGitOpsClusterCRD(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutProjectCRDs: true})
	ctx := context.Background()
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}); err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetUnstructuredContent(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gitopsclusters.apps.open-cluster-management.io"},
		"spec": map[string]any{
			"group": "apps.open-cluster-management.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "gitopsclusters", "singular": "gitopscluster", "kind": "GitOpsCluster", "listKind": "GitOpsClusterList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	})
	if err := env.Client.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(helmConfig(t, kubeconfig))
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	_, err = install.Run(loadChart(t), map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "not this project's") {
		t.Fatalf("helm install on another project's GitOpsCluster CRD: want a refusal, got %v", err)
	}

	// This project's CRD of an earlier revision: the install goes on (the manager warns).
	mark := []byte(`{"metadata":{"annotations":{"` + v1alpha1.AnnotationCRDRevision + `":"1"}}}`)
	if err := env.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, mark)); err != nil {
		t.Fatal(err)
	}
	install = action.NewInstall(helmConfig(t, kubeconfig))
	install.ReleaseName, install.Namespace = releaseName, releaseNS
	install.DryRunOption = "server"
	install.DryRun = true
	if _, err := install.Run(loadChart(t), map[string]any{}); err != nil {
		t.Fatalf("helm install over this project's older CRD: %v", err)
	}
}

// TestReadmeInstall renders the chart with the values the README's "Install on a real hub" sets
// (its helm install command and the principal options of the same step) and checks what the
// README and docs/install.md promise: the manager and the cert-reloader beside every agent run
// the pushed image, agent certificates live 24h, the principal runs beside the hub's Argo CD in
// argocd with the manager managing that namespace, and everything else is in the release
// namespace the command names.
func TestReadmeInstall(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	step := text[strings.Index(text, "## Install on a real hub"):]
	step = step[:strings.Index(step, "\n3. ")]
	vals := map[string]any{}
	namespace := ""
	for _, f := range strings.Fields(strings.ReplaceAll(strings.ReplaceAll(step, "`", " "), "\\", " ")) {
		if (strings.HasPrefix(f, "image.") || strings.HasPrefix(f, "principal.")) && strings.Contains(f, "=") {
			if err := strvals.ParseInto(f, vals); err != nil {
				t.Fatalf("README value %q: %v", f, err)
			}
		}
	}
	if i := strings.Index(step, "--namespace "); i >= 0 {
		namespace = strings.Fields(step[i+len("--namespace "):])[0]
	}
	if namespace != releaseNS || vals["image"] == nil || vals["principal"] == nil {
		t.Fatalf("the README's install step no longer reads as expected: namespace %q, values %v", namespace, vals)
	}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	image := fmt.Sprintf("%v:%v", vals["image"].(map[string]any)["repository"], vals["image"].(map[string]any)["tag"])
	dep := find(objs, "Deployment", releaseName)
	c, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	if got := c[0].(map[string]any)["image"]; got != image {
		t.Errorf("manager image %v, the README pushes %s", got, image)
	}
	args := managerArgs(t, objs)
	for _, want := range []string{"--reloader-image=" + image, "--agent-cert-validity=24h", "--managed-namespaces=" + releaseNS + ",argocd"} {
		if !slices.Contains(args, want) {
			t.Errorf("the manager is not run with %s: %v", want, args)
		}
	}
	if p := find(objs, "Deployment", "argocd-agent-principal"); p == nil || p.GetNamespace() != "argocd" {
		t.Errorf("the principal is not installed beside the hub's Argo CD: %v", p)
	}
	if dep.GetNamespace() != releaseNS {
		t.Errorf("the manager is in %q", dep.GetNamespace())
	}
}

// watchRecorder notes when each resource's first watch request was sent.
type watchRecorder struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (w *watchRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") == "true" {
			w.mu.Lock()
			if w.first == nil {
				w.first = map[string]time.Time{}
			}
			if _, seen := w.first[req.URL.Path]; !seen {
				w.first[req.URL.Path] = time.Now()
			}
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// firstOpenedAfter lists the resources whose first watch was sent after t.
func (w *watchRecorder) firstOpenedAfter(t time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for path, at := range w.first {
		if at.After(t) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestGracePeriodOutlastsTheGracefulShutdown: the kubelet kills the manager at the end of the
// pod's grace period, so the chart gives it more than the manager's graceful shutdown, in
// which the manager releases its leader lease, and refuses values that would not.
func TestGracePeriodOutlastsTheGracefulShutdown(t *testing.T) {
	grace := func(t *testing.T, objs []*unstructured.Unstructured) (int64, time.Duration) {
		t.Helper()
		dep := find(objs, "Deployment", releaseName)
		if dep == nil {
			t.Fatal("no manager Deployment")
		}
		field, found, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
		number, isNumber := field.(float64) // JSON's numbers, as the rendered YAML is read
		if !found || !isNumber || number != float64(int64(number)) {
			t.Fatalf("the manager's pod has no whole terminationGracePeriodSeconds (%v): the kubelet's 30-s default is the manager's whole graceful shutdown", field)
		}
		seconds := int64(number)
		for _, a := range managerArgs(t, objs) {
			if v, ok := strings.CutPrefix(a, "--graceful-shutdown-timeout="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatal(err)
				}
				return seconds, d
			}
		}
		t.Fatal("no --graceful-shutdown-timeout")
		return 0, 0
	}
	objs, err := render(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seconds, shutdown := grace(t, objs); time.Duration(seconds)*time.Second <= shutdown+5*time.Second {
		t.Errorf("default grace period %ds does not outlast the graceful shutdown %s by more than 5 s", seconds, shutdown)
	}
	for _, shutdown := range []string{"1m", "1m30s", "500ms", "2.5s", "90s"} {
		d, err := time.ParseDuration(shutdown)
		if err != nil {
			t.Fatal(err)
		}
		// The longest grace the chart refuses, and the shortest it takes, in whole seconds.
		refused := int64((d + 5*time.Second) / time.Second)
		for _, tc := range []struct {
			seconds int64
			ok      bool
		}{{refused, false}, {refused + 1, true}} {
			objs, err := render(t, map[string]any{"gracefulShutdownTimeout": shutdown, "terminationGracePeriodSeconds": tc.seconds})
			switch {
			case tc.ok && err != nil:
				t.Errorf("shutdown %s, grace %ds: refused: %v", shutdown, tc.seconds, err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSeconds")):
				t.Errorf("shutdown %s, grace %ds: want the chart to refuse it, got %v", shutdown, tc.seconds, err)
			case tc.ok:
				if got, _ := grace(t, objs); got != tc.seconds {
					t.Errorf("shutdown %s: grace period %d rendered as %d", shutdown, tc.seconds, got)
				}
			}
		}
	}
}
