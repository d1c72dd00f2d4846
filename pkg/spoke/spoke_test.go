package spoke

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

const testAddon = "argocd-agent-addon-argocd"

func build(t *testing.T, mode string, pullSecrets ...string) *addonv1alpha1.AddOnTemplate {
	t.Helper()
	return buildOf(t, "", mode, pullSecrets...)
}

// buildOf builds the components of an Argo CD release ("" is the default pair's).
func buildOf(t *testing.T, release, mode string, pullSecrets ...string) *addonv1alpha1.AddOnTemplate {
	t.Helper()
	tpl, err := BuildAddOnTemplate(Input{TemplateName: "argocd-components-ns.goc", AddonName: testAddon, ArgoCDVersion: release, Mode: mode, ImagePullSecrets: pullSecrets})
	if err != nil {
		t.Fatalf("BuildAddOnTemplate: %v", err)
	}
	return tpl
}

var tagPattern = regexp.MustCompile(`\{\{([^{}]*)\}\}`)

// render substitutes tags as OCM's template addon does and moves namespaced objects to the
// install namespace as its namespace decorator does.
func render(t *testing.T, tpl *addonv1alpha1.AddOnTemplate, values map[string]string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		s := tagPattern.ReplaceAllStringFunc(string(m.Raw), func(tag string) string {
			v, ok := values[tag[2:len(tag)-2]]
			if !ok {
				t.Fatalf("unknown tag %s", tag)
			}
			return v
		})
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON([]byte(s)); err != nil {
			t.Fatalf("rendered manifest is not an object: %v", err)
		}
		if o.GetNamespace() != "" {
			o.SetNamespace(values[addon.VarInstallNamespace])
		}
		out = append(out, o)
	}
	return out
}

func testValues() map[string]string {
	return map[string]string{
		addon.VarInstallNamespace: "gitops",
		addon.VarArgoCDImage:      "mirror.example.com/argoproj/argocd:v3.4.3",
		addon.VarRedisImage:       "mirror.example.com/docker/library/redis:8.2.3-alpine",
	}
}

func names(objs []*unstructured.Unstructured) []string {
	var n []string
	for _, o := range objs {
		n = append(n, o.GetKind()+"/"+o.GetName())
	}
	return n
}

// Every paired Argo CD release is embedded, from its own module version, and nothing else is.
func TestUpstreamIsThePairedArgoCDRelease(t *testing.T) {
	if got, want := ArgoCDVersions(), version.ArgoCDVersions(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("the binary carries Argo CD %v, the pairs name %v: run make manifests", got, want)
	}
	for _, release := range version.ArgoCDVersions() {
		want := "github.com/argoproj/argo-cd/v3@" + release + " manifests/core-install.yaml"
		if SourceOf(release) != want {
			t.Errorf("the manifests of %s come from %q, want %q: run make manifests", release, SourceOf(release), want)
		}
		imgs, err := UpstreamImagesOf(release)
		if err != nil {
			t.Fatal(err)
		}
		if imgs.ArgoCD != "quay.io/argoproj/argocd:"+release {
			t.Errorf("Argo CD image %q is not the paired release %s", imgs.ArgoCD, release)
		}
	}
	if Source() != SourceOf(version.ArgoCDVersion) {
		t.Errorf("Source() = %q, not the default pair's", Source())
	}
}

// The components follow the agent's release (what the issue calls Auto): v0.10.0's agents get
// Argo CD v3.5.0, v0.9.0's keep v3.4.3, an agent of no known release gets the default pair's.
func TestComponentsFollowTheAgentsRelease(t *testing.T) {
	for _, c := range []struct {
		agentImage, argoCD string
		known              bool
	}{
		{"quay.io/argoprojlabs/argocd-agent:v0.10.0", "v3.5.0", true},
		{"mirror.example.com/argoprojlabs/argocd-agent:v0.9.0", "v3.4.3", true},
		{"quay.io/argoprojlabs/argocd-agent:latest", version.ArgoCDVersion, false},
		{"quay.io/argoprojlabs/argocd-agent@sha256:" + strings.Repeat("a", 64), version.ArgoCDVersion, false},
	} {
		pair, known := version.ComponentsPair(c.agentImage)
		if pair.ArgoCD != c.argoCD || known != c.known {
			t.Errorf("%s: components of Argo CD %s (known %v), want %s (known %v)", c.agentImage, pair.ArgoCD, known, c.argoCD, c.known)
			continue
		}
		imgs, err := UpstreamImagesOf(pair.ArgoCD)
		if err != nil {
			t.Fatal(err)
		}
		if imgs.ArgoCD != "quay.io/argoproj/argocd:"+c.argoCD {
			t.Errorf("%s: the components run %s, want Argo CD %s", c.agentImage, imgs.ArgoCD, c.argoCD)
		}
	}
	// Given the agent's image, the builder and ImagesFor pick the same release.
	for image, release := range map[string]string{
		"quay.io/argoprojlabs/argocd-agent:v0.9.0":  "v3.4.3",
		"quay.io/argoprojlabs/argocd-agent:v0.10.0": "v3.5.0",
		"quay.io/argoprojlabs/argocd-agent:latest":  version.ArgoCDVersion,
		"": version.ArgoCDVersion,
	} {
		tpl, err := BuildAddOnTemplate(Input{TemplateName: "argocd-components-ns.goc", AddonName: testAddon, AgentImage: image, Mode: addon.ModeManaged})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tpl.Spec, buildOf(t, release, addon.ModeManaged).Spec) {
			t.Errorf("agent image %q: the components are not Argo CD %s's", image, release)
		}
		if imgs, err := ImagesFor(image); err != nil || imgs.ArgoCD != "quay.io/argoproj/argocd:"+release {
			t.Errorf("ImagesFor(%q) = %+v, %v; want Argo CD %s", image, imgs, err, release)
		}
	}
	// The two releases' CRDs differ: a template built for one is not the other's.
	older, newer := buildOf(t, "v3.4.3", addon.ModeManaged), buildOf(t, "v3.5.0", addon.ModeManaged)
	if reflect.DeepEqual(older.Spec, newer.Spec) {
		t.Error("the components of v3.4.3 and v3.5.0 are the same template")
	}
	if !reflect.DeepEqual(build(t, addon.ModeManaged).Spec, buildOf(t, version.ArgoCDVersion, addon.ModeManaged).Spec) {
		t.Error("an Input that names no release does not get the default pair's")
	}
	if _, err := BuildAddOnTemplate(Input{TemplateName: "t", AddonName: testAddon, ArgoCDVersion: "v2.0.0", Mode: addon.ModeManaged}); err == nil {
		t.Error("a release the binary does not carry was built")
	}
	if _, err := UpstreamImagesOf("../v3.5.0"); err == nil {
		t.Error("a path was taken for a release")
	}
}

func TestComponentsPerMode(t *testing.T) {
	common := []string{
		"CustomResourceDefinition/applications.argoproj.io", "CustomResourceDefinition/appprojects.argoproj.io",
		"StatefulSet/argocd-application-controller", "Deployment/argocd-repo-server", "Deployment/argocd-redis",
		"ConfigMap/argocd-cm", "ConfigMap/argocd-cmd-params-cm", "Secret/argocd-secret", "Service/argocd-redis",
		"Service/argocd-repo-server", "NetworkPolicy/" + AgentRedisPolicyName, "AppProject/default",
	}
	appSet := []string{"CustomResourceDefinition/applicationsets.argoproj.io", "Deployment/argocd-applicationset-controller"}
	for _, release := range version.ArgoCDVersions() {
		for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
			got := names(render(t, buildOf(t, release, mode), testValues()))
			for _, w := range common {
				if !slices.Contains(got, w) {
					t.Errorf("%s %s: %s is missing from %v", release, mode, w, got)
				}
			}
			for _, w := range appSet {
				if slices.Contains(got, w) != (mode == addon.ModeAutonomous) {
					t.Errorf("%s %s: %s present=%v, want present only in autonomous mode", release, mode, w, !slices.Contains(got, w))
				}
			}
			for _, absent := range []string{"Deployment/argocd-server", "Deployment/argocd-dex-server", "Deployment/argocd-notifications-controller"} {
				if slices.Contains(got, absent) {
					t.Errorf("%s %s: %s is installed, but the agent does not need it", release, mode, absent)
				}
			}
			if got[0] != "CustomResourceDefinition/applications.argoproj.io" {
				t.Errorf("%s %s: CRDs must come first, got %v", release, mode, got)
			}
		}
	}
}

// OCM's work webhook refuses a ManifestWork over 500 KiB and OCM's addon manager fills each work
// up to its budget (500 KiB in addon-framework v1.2, 400 KiB later): every object must fit alone.
// The AddOnTemplate itself is one etcd object, 1.5 MiB at most.
func TestSizesFitOCMAndEtcd(t *testing.T) {
	for _, release := range version.ArgoCDVersions() {
		t.Run(release, func(t *testing.T) { sizesFit(t, release) })
	}
}

func sizesFit(t *testing.T, release string) {
	const workBudget, etcdLimit = 400 * 1024, 1536 * 1024
	for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
		tpl := buildOf(t, release, mode)
		largest, largestName := 0, ""
		for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
			if len(m.Raw) > largest {
				largest = len(m.Raw)
				var meta struct{ Metadata struct{ Name string } }
				_ = json.Unmarshal(m.Raw, &meta)
				largestName = meta.Metadata.Name
			}
		}
		raw, err := json.Marshal(tpl)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: template %d bytes in %d manifests; largest %s %d bytes", mode, len(raw), len(tpl.Spec.AgentSpec.Workload.Manifests), largestName, largest)
		if largest > workBudget {
			t.Errorf("%s: %s is %d bytes, more than one ManifestWork's budget of %d", mode, largestName, largest, workBudget)
		}
		if len(raw) > etcdLimit*3/4 {
			t.Errorf("%s: the AddOnTemplate is %d bytes, too close to etcd's limit of %d", mode, len(raw), etcdLimit)
		}
		// OCM keeps the rendered template once per cluster: at 5,000 clusters every 100 KB
		// is 500 MB of the hub's etcd.
		if perCluster := map[string]int{addon.ModeManaged: 100_000, addon.ModeAutonomous: 450_000}[mode]; len(raw) > perCluster {
			t.Errorf("%s: the components are %d bytes per cluster, more than %d", mode, len(raw), perCluster)
		}
	}
}

// TestCRDsKeepTheirValidation: the components' CRDs lose their documentation and the
// Application's status schema (only Argo CD's controllers write it), nothing users write:
// every property of an Application's spec and operation is still there, and a property named
// "description" (AppProject's spec.description) is a field, not documentation, and stays.
func TestCRDsKeepTheirValidation(t *testing.T) {
	for _, release := range version.ArgoCDVersions() {
		t.Run(release, func(t *testing.T) { crdsKeepTheirValidation(t, release) })
	}
}

func crdsKeepTheirValidation(t *testing.T, release string) {
	all, err := upstreamObjects(release)
	if err != nil {
		t.Fatal(err)
	}
	upstream := map[string]*unstructured.Unstructured{}
	for _, o := range all {
		if o.GetKind() == "CustomResourceDefinition" {
			upstream[o.GetName()] = o
		}
	}
	schema := func(o *unstructured.Unstructured, path ...string) map[string]any {
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		m, _, _ := unstructured.NestedMap(versions[0].(map[string]any), append([]string{"schema", "openAPIV3Schema"}, path...)...)
		return m
	}
	var fields func(prefix string, s map[string]any, out map[string]bool)
	fields = func(prefix string, s map[string]any, out map[string]bool) {
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			out[prefix+"."+k] = true
			fields(prefix+"."+k, v.(map[string]any), out)
		}
		if items, ok := s["items"].(map[string]any); ok {
			fields(prefix+"[]", items, out)
		}
	}
	for _, o := range render(t, buildOf(t, release, addon.ModeAutonomous), testValues()) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		raw, _ := o.MarshalJSON()
		if strings.Contains(string(raw), `"description":"`) {
			t.Errorf("%s keeps documentation", o.GetName())
		}
		for _, part := range []string{"spec", "operation"} {
			want, got := map[string]bool{}, map[string]bool{}
			if s := schema(upstream[o.GetName()], "properties", part); s != nil {
				fields(part, s, want)
				fields(part, schema(o, "properties", part), got)
			}
			for f := range want {
				if !got[f] {
					t.Errorf("%s: %s lost its schema", o.GetName(), f)
				}
			}
		}
		if o.GetName() == "applications.argoproj.io" {
			if st := schema(o, "properties", "status"); st["x-kubernetes-preserve-unknown-fields"] != true || st["type"] != "object" {
				t.Errorf("Application status schema %v", st)
			}
		}
		if o.GetName() == "appprojects.argoproj.io" {
			if d := schema(o, "properties", "spec", "properties", "description"); d["type"] != "string" {
				t.Errorf("AppProject spec.description is gone: %v", d)
			}
		}
	}
}

func TestImagesAreVariablesAndPullSecretsReachEveryPod(t *testing.T) {
	tpl := build(t, addon.ModeAutonomous, "regcred", "mirror-creds")
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		if strings.Contains(string(m.Raw), "quay.io/") || strings.Contains(string(m.Raw), "public.ecr.aws/") {
			t.Errorf("a literal upstream image is left in %s", m.Raw[:min(len(m.Raw), 200)])
		}
	}
	pods := 0
	for _, o := range render(t, tpl, testValues()) {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		pods++
		spec := podSpec(t, o)
		var secrets []string
		for _, s := range spec.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if !slices.Equal(secrets, []string{"regcred", "mirror-creds"}) {
			t.Errorf("%s %s: imagePullSecrets %v", o.GetKind(), o.GetName(), secrets)
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			if !strings.HasPrefix(c.Image, "mirror.example.com/") {
				t.Errorf("%s %s container %s runs %s, not from the mirror", o.GetKind(), o.GetName(), c.Name, c.Image)
			}
		}
	}
	if pods != 4 {
		t.Errorf("found %d workloads, want 4 (controller, repo-server, redis, applicationset-controller)", pods)
	}
	for _, o := range render(t, build(t, addon.ModeManaged), testValues()) {
		if o.GetKind() == "Deployment" || o.GetKind() == "StatefulSet" {
			if got := podSpec(t, o).ImagePullSecrets; len(got) != 0 {
				t.Errorf("no pull secrets configured, but %s has %v", o.GetName(), got)
			}
		}
	}
}

func podSpec(t *testing.T, o *unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	raw, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	switch o.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec
	case "StatefulSet":
		var s appsv1.StatefulSet
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		return s.Spec.Template.Spec
	}
	t.Fatalf("%s is not a workload", o.GetKind())
	return corev1.PodSpec{}
}

// The restricted Pod Security Standard, as the API server's PodSecurity admission checks it for
// the fields these pods set.
func TestPodsMeetTheRestrictedProfile(t *testing.T) {
	for _, release := range version.ArgoCDVersions() {
		t.Run(release, func(t *testing.T) { podsMeetTheRestrictedProfile(t, release) })
	}
}

func podsMeetTheRestrictedProfile(t *testing.T, release string) {
	for _, o := range render(t, buildOf(t, release, addon.ModeAutonomous), testValues()) {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		spec := podSpec(t, o)
		psc := spec.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s uses host namespaces", o.GetName())
		}
		for _, v := range spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s mounts a hostPath", o.GetName())
			}
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s/%s has no securityContext", o.GetName(), c.Name)
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s/%s allows privilege escalation", o.GetName(), c.Name)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s/%s does not drop ALL capabilities", o.GetName(), c.Name)
			}
			if !(sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) && !(psc.RunAsNonRoot != nil && *psc.RunAsNonRoot) {
				t.Errorf("%s/%s may run as root", o.GetName(), c.Name)
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = psc.SeccompProfile
			}
			if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s/%s has no RuntimeDefault seccomp profile", o.GetName(), c.Name)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s/%s is privileged", o.GetName(), c.Name)
			}
		}
	}
}

// An Argo CD installed on the cluster by other means names its cluster-scoped RBAC after the
// component; the addon's must never land on those names, or applying the template would rebind
// that Argo CD's ClusterRoleBinding to the addon's ServiceAccount (and removing the addon would
// delete it).
func TestClusterScopedObjectsCannotCollideWithAStockInstall(t *testing.T) {
	stock := map[string]bool{}
	objs, err := Objects(addon.ModeAutonomous)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		stock[o.GetKind()+"/"+o.GetName()] = true
	}
	for _, o := range render(t, build(t, addon.ModeAutonomous), testValues()) {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			if stock[o.GetKind()+"/"+o.GetName()] {
				t.Errorf("%s %s has the stock install's name", o.GetKind(), o.GetName())
			}
			if !strings.HasSuffix(o.GetName(), ":gitops") {
				t.Errorf("%s %s does not name the install namespace", o.GetKind(), o.GetName())
			}
		}
		if o.GetKind() == "ClusterRoleBinding" {
			raw, _ := o.MarshalJSON()
			var crb rbacv1.ClusterRoleBinding
			if err := json.Unmarshal(raw, &crb); err != nil {
				t.Fatal(err)
			}
			if crb.RoleRef.Name != o.GetName() {
				t.Errorf("ClusterRoleBinding %s binds %s", o.GetName(), crb.RoleRef.Name)
			}
		}
	}
}

// CRDs are never deleted with the addon (that would delete every Application on the cluster),
// nor is the default AppProject those Applications name; everything else is, and everything
// carries the installed-by label.
func TestOnlyCRDsAndTheDefaultProjectAreOrphaned(t *testing.T) {
	for _, o := range render(t, build(t, addon.ModeAutonomous), testValues()) {
		_, orphan := o.GetAnnotations()[addonv1alpha1.DeletionOrphanAnnotationKey]
		if orphan != (o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "AppProject") {
			t.Errorf("%s %s: orphaned=%v", o.GetKind(), o.GetName(), orphan)
		}
		if o.GetLabels()[LabelInstalledBy] != testAddon {
			t.Errorf("%s %s lacks the installed-by label", o.GetKind(), o.GetName())
		}
		if o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" && o.GetNamespace() != "gitops" {
			t.Errorf("%s %s is in namespace %q, want the install namespace", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
}

// The addon runs no argocd-server, which is what makes the "default" AppProject in an Argo CD
// install: the addon makes it, with argocd-server's spec, once (the work agent never updates it,
// so a user's tightening stays), in the install namespace.
func TestDefaultAppProjectIsCreatedOnce(t *testing.T) {
	for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
		tpl := build(t, mode)
		var project *unstructured.Unstructured
		for _, o := range render(t, tpl, testValues()) {
			if o.GetKind() == "AppProject" {
				project = o
			}
		}
		if project == nil || project.GetName() != DefaultAppProjectName || project.GetNamespace() != "gitops" {
			t.Fatalf("%s: no AppProject default in the install namespace: %v", mode, project)
		}
		want := map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		}
		if !reflect.DeepEqual(project.Object["spec"], want) {
			t.Errorf("%s: spec %v, want argocd-server's %v", mode, project.Object["spec"], want)
		}
		var createOnly bool
		for _, c := range tpl.Spec.AgentSpec.ManifestConfigs {
			id := c.ResourceIdentifier
			if id.Group == "argoproj.io" && id.Resource == "appprojects" && id.Name == DefaultAppProjectName && id.Namespace == "*" &&
				c.UpdateStrategy != nil && c.UpdateStrategy.Type == workv1.UpdateStrategyTypeCreateOnly {
				createOnly = true
			}
		}
		if !createOnly {
			t.Errorf("%s: the default AppProject is not create-only: %+v", mode, tpl.Spec.AgentSpec.ManifestConfigs)
		}
		// argocd-agent writes the GnuPG keys in managed mode: the work agent must not own
		// their content.
		gpg := slices.ContainsFunc(tpl.Spec.AgentSpec.ManifestConfigs, func(c workv1.ManifestConfigOption) bool {
			id := c.ResourceIdentifier
			return id.Group == "" && id.Resource == "configmaps" && id.Name == GPGKeysConfigMap && id.Namespace == "*" &&
				c.UpdateStrategy != nil && c.UpdateStrategy.Type == workv1.UpdateStrategyTypeCreateOnly
		})
		if !gpg {
			t.Errorf("%s: %s is not create-only: %+v", mode, GPGKeysConfigMap, tpl.Spec.AgentSpec.ManifestConfigs)
		}
	}
}

func TestRewriteRegistry(t *testing.T) {
	for _, c := range []struct{ image, registry, want string }{
		{"quay.io/argoproj/argocd:v3.4.3", "mirror.example.com", "mirror.example.com/argoproj/argocd:v3.4.3"},
		{"public.ecr.aws/docker/library/redis:8.2.3-alpine", "mirror.example.com:5000/cache/", "mirror.example.com:5000/cache/docker/library/redis:8.2.3-alpine"},
		{"localhost/agent:v1", "reg.local", "reg.local/agent:v1"},
		{"redis:8", "reg.local", "reg.local/redis:8"},
		{"library/redis:8", "reg.local", "reg.local/library/redis:8"},
		{"quay.io/argoproj/argocd:v3.4.3", "", "quay.io/argoproj/argocd:v3.4.3"},
	} {
		if got := RewriteRegistry(c.image, c.registry); got != c.want {
			t.Errorf("RewriteRegistry(%q, %q) = %q, want %q", c.image, c.registry, got, c.want)
		}
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	for _, in := range []Input{
		{TemplateName: "t", AddonName: testAddon, Mode: "pull"},
		{TemplateName: "T_", AddonName: testAddon, Mode: addon.ModeManaged},
		{TemplateName: "t", AddonName: testAddon, Mode: addon.ModeManaged, ImagePullSecrets: []string{"Bad Name"}},
	} {
		if _, err := BuildAddOnTemplate(in); err == nil {
			t.Errorf("BuildAddOnTemplate(%+v) succeeded", in)
		}
	}
}

// The redis password is made on each cluster by redis's own init container, as Argo CD's install
// does, with a Role that lets its ServiceAccount create that Secret: the template carries no
// password, so no two clusters share one through it.
func TestRedisPasswordIsGeneratedOnTheCluster(t *testing.T) {
	objs := render(t, build(t, addon.ModeManaged), testValues())
	var redis *unstructured.Unstructured
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for _, o := range objs {
		raw, _ := o.MarshalJSON()
		switch o.GetKind() + "/" + o.GetName() {
		case "Secret/" + addon.RedisSecretName:
			t.Fatalf("the template carries the redis password Secret %s", o.GetName())
		case "Deployment/argocd-redis":
			redis = o
		case "Role/argocd-redis":
			if err := json.Unmarshal(raw, &role); err != nil {
				t.Fatal(err)
			}
		case "RoleBinding/argocd-redis":
			if err := json.Unmarshal(raw, &binding); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(string(raw), `"auth":`) {
			t.Errorf("%s %s holds an auth key", o.GetKind(), o.GetName())
		}
	}
	if redis == nil {
		t.Fatal("no redis Deployment")
	}
	spec := podSpec(t, redis)
	if len(spec.InitContainers) != 1 || strings.Join(spec.InitContainers[0].Command, " ") != "argocd admin redis-initial-password" {
		t.Fatalf("redis init containers %+v do not generate the password", spec.InitContainers)
	}
	if spec.ServiceAccountName != "argocd-redis" || binding.RoleRef.Name != "argocd-redis" || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "argocd-redis" {
		t.Errorf("redis runs as %q, bound by %+v", spec.ServiceAccountName, binding)
	}
	canCreate := false
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") && slices.Contains(r.Verbs, "create") {
			canCreate = true
		}
	}
	if !canCreate {
		t.Errorf("Role argocd-redis cannot create the password Secret: %+v", role.Rules)
	}
	env := spec.Containers[0].Env
	if len(env) == 0 || env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef == nil ||
		env[0].ValueFrom.SecretKeyRef.Name != addon.RedisSecretName || env[0].ValueFrom.SecretKeyRef.Key != addon.RedisSecretKey {
		t.Errorf("redis does not read its password from %s/%s: %+v", addon.RedisSecretName, addon.RedisSecretKey, env)
	}
}

// TestAssignedUserIDsReachEveryWorkload: with AssignedUserIDs no pod or container of the
// components, init containers included, names a UID, GID or fsGroup (redis runs as 999 in
// Argo CD's install, outside OpenShift's restricted-v2 range); by default redis keeps it.
func TestAssignedUserIDsReachEveryWorkload(t *testing.T) {
	fixedIDs := func(objs []*unstructured.Unstructured) []string {
		var found []string
		for _, o := range objs {
			spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			if spec == nil {
				continue
			}
			check := func(where string, sc any) {
				m, _ := sc.(map[string]any)
				for _, k := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
					if _, ok := m[k]; ok {
						found = append(found, o.GetKind()+"/"+o.GetName()+" "+where+" "+k)
					}
				}
			}
			check("pod", spec["securityContext"])
			for _, field := range []string{"initContainers", "containers"} {
				list, _ := spec[field].([]any)
				for _, c := range list {
					check(field, c.(map[string]any)["securityContext"])
				}
			}
		}
		return found
	}
	for _, mode := range []string{addon.ModeManaged, addon.ModeAutonomous} {
		if found := fixedIDs(render(t, build(t, mode), testValues())); len(found) == 0 {
			t.Errorf("%s: the default template names no UID (redis runs as 999 upstream)", mode)
		}
		tpl, err := BuildAddOnTemplate(Input{TemplateName: "argocd-components-ns.goc", AddonName: testAddon, Mode: mode, AssignedUserIDs: true})
		if err != nil {
			t.Fatal(err)
		}
		if found := fixedIDs(render(t, tpl, testValues())); len(found) > 0 {
			t.Errorf("%s: assigned user IDs, yet %v", mode, found)
		}
	}
}
