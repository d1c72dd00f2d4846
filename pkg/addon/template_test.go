package addon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

func TestBuildAddOnTemplateIsDeterministic(t *testing.T) {
	in := validTemplateInput(t)
	a, b := mustTemplate(t, in), mustTemplate(t, in)
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Fatalf("two builds from the same input differ:\n%s\n%s", ja, jb)
	}
	for i := range a.Spec.AgentSpec.Workload.Manifests {
		if !bytes.Equal(a.Spec.AgentSpec.Workload.Manifests[i].Raw, b.Spec.AgentSpec.Workload.Manifests[i].Raw) {
			t.Fatalf("manifest %d differs between builds", i)
		}
	}
	base := TemplateHash(a)
	if base != TemplateHash(b) {
		t.Fatalf("hash differs between identical builds")
	}
	if len(base) != 64 {
		t.Fatalf("hash %q is not a hex sha256", base)
	}

	otherCA := testCAPEM(t, "another-ca")
	changes := map[string]func(*TemplateInput){
		"mode":               func(in *TemplateInput) { in.Mode = ModeAutonomous },
		"ca bundle":          func(in *TemplateInput) { in.CABundlePEM = otherCA },
		"signer":             func(in *TemplateInput) { in.SignerName = "example.com/other-signer" },
		"addon name":         func(in *TemplateInput) { in.AddonName = "other-addon" },
		"signing ca ns":      func(in *TemplateInput) { in.SigningCANamespace = "other-ns" },
		"ca bundle, 2 certs": func(in *TemplateInput) { in.CABundlePEM = append(append([]byte(nil), in.CABundlePEM...), otherCA...) },
	}
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		changed := validTemplateInput(t)
		changed.CABundlePEM = in.CABundlePEM
		change(&changed)
		h := TemplateHash(mustTemplate(t, changed))
		if prev, dup := seen[h]; dup {
			t.Errorf("changing %s gives the same hash as %s", name, prev)
		}
		seen[h] = name
	}
}

func TestTemplateHashIgnoresMetadata(t *testing.T) {
	in := validTemplateInput(t)
	a := mustTemplate(t, in)
	in.TemplateName = "renamed"
	b := mustTemplate(t, in)
	if TemplateHash(a) != TemplateHash(b) {
		t.Fatalf("hash depends on the template name, it must cover the spec only")
	}
	if TemplateHash(nil) != "" {
		t.Fatalf("hash of nil must be empty")
	}
}

func TestTemplateTagsAreBuiltinsOrADCVariables(t *testing.T) {
	for _, mode := range []string{ModeManaged, ModeAutonomous} {
		in := validTemplateInput(t)
		in.Mode = mode
		tpl := mustTemplate(t, in)
		adcIn := validADCInput()
		adcIn.Mode = mode
		adc := mustADC(t, adcIn)

		known := map[string]bool{}
		for _, b := range BuiltinVariables {
			known[b] = true
		}
		emitted := map[string]bool{}
		for _, v := range adc.Spec.CustomizedVariables {
			known[v.Name] = true
			emitted[v.Name] = true
		}

		used := map[string]bool{}
		for i, m := range tpl.Spec.AgentSpec.Workload.Manifests {
			s := string(m.Raw)
			matches := tagPattern.FindAllStringSubmatch(s, -1)
			if strings.Count(s, "{{") != len(matches) {
				t.Fatalf("manifest %d has a malformed tag: %s", i, s)
			}
			for _, match := range matches {
				if !known[match[1]] {
					t.Errorf("manifest %d uses tag {{%s}}, which is neither an OCM built-in nor an ADC variable", i, match[1])
				}
				used[match[1]] = true
			}
		}
		for name := range emitted {
			if !used[name] {
				t.Errorf("ADC variable %s is never referenced by the template", name)
			}
		}
		if !used[VarInstallNamespace] {
			t.Errorf("template never uses {{%s}}", VarInstallNamespace)
		}
	}
}

type renderedTemplate struct {
	namespace          corev1.Namespace
	serviceAccount     corev1.ServiceAccount
	secret             corev1.Secret
	role               rbacv1.Role
	roleBinding        rbacv1.RoleBinding
	clusterRole        rbacv1.ClusterRole
	clusterRoleBinding rbacv1.ClusterRoleBinding
	deployment         appsv1.Deployment
	kinds              []string
}

// renderTemplate substitutes like OCM and decodes every manifest strictly.
func renderTemplate(t *testing.T, tpl *addonv1alpha1.AddOnTemplate, adc *addonv1alpha1.AddOnDeploymentConfig) renderedTemplate {
	t.Helper()
	var r renderedTemplate
	vals := ocmValues(adc, "cluster1")
	for i, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		out, unknown := renderLikeOCM(t, m.Raw, vals)
		if len(unknown) > 0 {
			t.Fatalf("manifest %d: OCM would render unknown tags %v as empty strings", i, unknown)
		}
		if strings.Contains(out, "{{") {
			t.Fatalf("manifest %d still holds a tag after rendering: %s", i, out)
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("manifest %d is not valid JSON after rendering: %s", i, out)
		}
		out = decorateNamespaceLikeOCM(t, out, adc.Spec.AgentInstallNamespace)
		kind := manifestKind(t, []byte(out))
		r.kinds = append(r.kinds, kind)
		switch kind {
		case "Namespace":
			decodeStrict(t, out, &r.namespace)
		case "ServiceAccount":
			decodeStrict(t, out, &r.serviceAccount)
		case "Secret":
			decodeStrict(t, out, &r.secret)
		case "Role":
			decodeStrict(t, out, &r.role)
		case "RoleBinding":
			decodeStrict(t, out, &r.roleBinding)
		case "ClusterRole":
			decodeStrict(t, out, &r.clusterRole)
		case "ClusterRoleBinding":
			decodeStrict(t, out, &r.clusterRoleBinding)
		case "Deployment":
			decodeStrict(t, out, &r.deployment)
		default:
			t.Fatalf("unexpected kind %q in manifest %d", kind, i)
		}
	}
	return r
}

func TestRenderedManifestsAreValidAndCarryTheVariables(t *testing.T) {
	for _, mode := range []string{ModeManaged, ModeAutonomous} {
		t.Run(mode, func(t *testing.T) {
			in := validTemplateInput(t)
			in.Mode = mode
			tpl := mustTemplate(t, in)
			adcIn := validADCInput()
			adcIn.Mode = mode
			adcIn.AgentInstallNamespace = "gitops"
			adcIn.ServerAddress = "10.1.2.3"
			adcIn.ServerPort = 30443
			adc := mustADC(t, adcIn)
			r := renderTemplate(t, tpl, adc)

			wantKinds := []string{"Namespace", "ServiceAccount", "Secret", "Role", "RoleBinding",
				"ClusterRole", "ClusterRoleBinding", "Deployment"}
			if !slices.Equal(r.kinds, wantKinds) {
				t.Fatalf("kinds %v, want %v (namespace first, deployment last)", r.kinds, wantKinds)
			}
			for _, ns := range []string{r.serviceAccount.Namespace, r.secret.Namespace, r.role.Namespace,
				r.roleBinding.Namespace, r.deployment.Namespace, r.namespace.Name,
				r.roleBinding.Subjects[0].Namespace, r.clusterRoleBinding.Subjects[0].Namespace} {
				if ns != "gitops" {
					t.Errorf("namespace field is %q, want the install namespace %q", ns, "gitops")
				}
			}

			containers := r.deployment.Spec.Template.Spec.Containers
			if len(containers) != 2 {
				t.Fatalf("want agent and reloader containers, got %d", len(containers))
			}
			agent := containers[0]
			for _, want := range []string{
				"--server-address=10.1.2.3",
				"--server-port=30443",
				"--agent-mode=" + mode,
				"--namespace=gitops",
				"--log-level=debug",
				"--creds=mtls:any",
				"--root-ca-secret-name=argocd-agent-ca",
				"--redis-addr=argocd-redis:6379",
			} {
				if !slices.Contains(agent.Args, want) {
					t.Errorf("agent args %v lack %q", agent.Args, want)
				}
			}
			if agent.Args[0] != "agent" {
				t.Errorf("first agent arg is %q, want the subcommand \"agent\"", agent.Args[0])
			}
			if agent.Image != adcIn.AgentImage {
				t.Errorf("agent image %q, want %q", agent.Image, adcIn.AgentImage)
			}
			if containers[1].Image != adcIn.ReloaderImage {
				t.Errorf("reloader image %q, want %q", containers[1].Image, adcIn.ReloaderImage)
			}
			if r.namespace.Annotations[addonv1alpha1.DeletionOrphanAnnotationKey] != "" ||
				!hasKey(r.namespace.Annotations, addonv1alpha1.DeletionOrphanAnnotationKey) {
				t.Errorf("install namespace must be orphaned on addon removal, annotations %v", r.namespace.Annotations)
			}
		})
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func TestCASecretHoldsOnlyCACrt(t *testing.T) {
	in := validTemplateInput(t)
	tpl := mustTemplate(t, in)
	r := renderTemplate(t, tpl, mustADC(t, validADCInput()))
	if r.secret.Name != "argocd-agent-ca" {
		t.Fatalf("CA secret name %q", r.secret.Name)
	}
	if len(r.secret.Data) != 1 || len(r.secret.StringData) != 0 {
		t.Fatalf("CA secret must hold exactly one key, got data %v stringData %v", keys(r.secret.Data), r.secret.StringData)
	}
	if !bytes.Equal(r.secret.Data["ca.crt"], in.CABundlePEM) {
		t.Fatalf("ca.crt does not hold the given PEM")
	}
	// The template itself must carry the CA literally, not through a tag.
	raw := string(rawByKind(t, tpl, "Secret"))
	if strings.Contains(raw, "{{CA") || !strings.Contains(raw, `"ca.crt":"`) {
		t.Fatalf("CA must be a literal in the template: %s", raw)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	forbiddenRoles := map[string]bool{"cluster-admin": true, "admin": true, "edit": true}
	for _, mode := range []string{ModeManaged, ModeAutonomous} {
		t.Run(mode, func(t *testing.T) {
			in := validTemplateInput(t)
			in.Mode = mode
			r := renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput()))

			for _, rules := range [][]rbacv1.PolicyRule{r.role.Rules, r.clusterRole.Rules} {
				for _, rule := range rules {
					wildcard := false
					for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
						for _, v := range list {
							wildcard = wildcard || strings.Contains(v, "*")
						}
					}
					// The one wildcard: the resource proxy's GET of a named live object.
					if wildcard && !(slices.Equal(rule.APIGroups, []string{"*"}) && slices.Equal(rule.Resources, []string{"*"}) && slices.Equal(rule.Verbs, []string{"get"})) {
						t.Errorf("rule %+v uses a wildcard beyond get on every resource", rule)
					}
					if len(rule.NonResourceURLs) > 0 {
						t.Errorf("rule %+v grants non-resource URLs", rule)
					}
					for _, v := range rule.Verbs {
						if v == "escalate" || v == "bind" || v == "impersonate" {
							t.Errorf("rule %+v grants %s", rule, v)
						}
					}
				}
			}
			for _, rule := range r.clusterRole.Rules {
				for _, v := range rule.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("cluster role rule %+v writes cluster-wide", rule)
					}
				}
			}
			for _, ref := range []rbacv1.RoleRef{r.roleBinding.RoleRef, r.clusterRoleBinding.RoleRef} {
				if forbiddenRoles[ref.Name] {
					t.Errorf("binding references %q", ref.Name)
				}
			}
			if r.roleBinding.RoleRef.Kind != "Role" || r.roleBinding.RoleRef.Name != r.role.Name {
				t.Errorf("role binding refers to %+v, want the agent Role %q", r.roleBinding.RoleRef, r.role.Name)
			}
			if r.clusterRoleBinding.RoleRef.Kind != "ClusterRole" || r.clusterRoleBinding.RoleRef.Name != r.clusterRole.Name {
				t.Errorf("cluster role binding refers to %+v, want %q", r.clusterRoleBinding.RoleRef, r.clusterRole.Name)
			}
			for _, s := range append(r.roleBinding.Subjects, r.clusterRoleBinding.Subjects...) {
				if s.Kind != rbacv1.ServiceAccountKind || s.Name != r.serviceAccount.Name {
					t.Errorf("binding subject %+v is not the agent service account", s)
				}
			}
			if r.deployment.Spec.Template.Spec.ServiceAccountName != r.serviceAccount.Name {
				t.Errorf("deployment runs as %q, want %q", r.deployment.Spec.Template.Spec.ServiceAccountName, r.serviceAccount.Name)
			}

			// Namespaced: what the agent needs, create only where it creates.
			appsVerbs := verbsFor(r.role.Rules, "argoproj.io", "applications")
			if !slices.Contains(appsVerbs, "update") || !slices.Contains(appsVerbs, "delete") || !slices.Contains(appsVerbs, "watch") {
				t.Errorf("applications verbs %v lack update/delete/watch", appsVerbs)
			}
			if len(verbsFor(r.role.Rules, "argoproj.io", "appprojects")) == 0 {
				t.Errorf("role does not cover argoproj.io appprojects")
			}
			for _, res := range []string{"secrets", "configmaps"} {
				if !slices.Contains(verbsFor(r.role.Rules, "", res), "get") {
					t.Errorf("role cannot get %s", res)
				}
			}
			if !slices.Equal(verbsFor(r.role.Rules, "", "events"), []string{"create", "list"}) {
				t.Errorf("events verbs %v, want [create list]", verbsFor(r.role.Rules, "", "events"))
			}
			wantCreate := mode == ModeManaged
			if got := slices.Contains(appsVerbs, "create"); got != wantCreate {
				t.Errorf("mode %s: create on applications = %v, want %v", mode, got, wantCreate)
			}
		})
	}
}

func verbsFor(rules []rbacv1.PolicyRule, group, res string) []string {
	var verbs []string
	for _, rule := range rules {
		if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, res) {
			verbs = append(verbs, rule.Verbs...)
		}
	}
	return verbs
}

func TestClusterScopedNamesAreUniquePerAddonAndNamespace(t *testing.T) {
	names := map[string]string{}
	for _, addonName := range []string{"argocd-agent-addon", "argocd-agent-addon-2"} {
		for _, ns := range []string{"argocd", "gitops"} {
			in := validTemplateInput(t)
			in.AddonName = addonName
			adcIn := validADCInput()
			adcIn.AgentInstallNamespace = ns
			r := renderTemplate(t, mustTemplate(t, in), mustADC(t, adcIn))
			if r.clusterRole.Name != r.clusterRoleBinding.Name {
				t.Errorf("cluster role %q and binding %q differ", r.clusterRole.Name, r.clusterRoleBinding.Name)
			}
			key := addonName + "/" + ns
			if prev, dup := names[r.clusterRole.Name]; dup {
				t.Errorf("%s and %s both render cluster-scoped name %q", prev, key, r.clusterRole.Name)
			}
			names[r.clusterRole.Name] = key
		}
	}
}

func TestRegistrationIsOneCustomSigner(t *testing.T) {
	in := validTemplateInput(t)
	tpl := mustTemplate(t, in)
	regs := tpl.Spec.Registration
	if len(regs) != 1 {
		t.Fatalf("want exactly one registration, got %d", len(regs))
	}
	reg := regs[0]
	if reg.Type != addonv1alpha1.RegistrationTypeCustomSigner || reg.KubeClient != nil || reg.CustomSigner == nil {
		t.Fatalf("registration %+v is not a CustomSigner", reg)
	}
	cs := reg.CustomSigner
	if cs.SignerName != in.SignerName {
		t.Errorf("signer %q, want %q", cs.SignerName, in.SignerName)
	}
	// OCM's addon-manager must never find the signing CA: no Secret can have this name.
	if len(validation.IsDNS1123Subdomain(cs.SigningCA.Name)) == 0 || cs.SigningCA.Namespace != in.SigningCANamespace {
		t.Errorf("signingCA %+v names a Secret that could exist, or not namespace %s", cs.SigningCA, in.SigningCANamespace)
	}
	if cs.Subject != nil {
		t.Errorf("subject %+v, want nil (OCM default)", cs.Subject)
	}
	if tpl.Spec.AddonName != in.AddonName || tpl.Name != in.TemplateName {
		t.Errorf("addonName %q name %q", tpl.Spec.AddonName, tpl.Name)
	}
	if tpl.Kind != "AddOnTemplate" || tpl.APIVersion != "addon.open-cluster-management.io/v1alpha1" || tpl.Namespace != "" {
		t.Errorf("type meta %+v namespace %q", tpl.TypeMeta, tpl.Namespace)
	}
}

func TestDeploymentShape(t *testing.T) {
	in := validTemplateInput(t)
	r := renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput()))
	d := r.deployment
	if d.Name != "argocd-agent-agent" {
		t.Errorf("deployment name %q", d.Name)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want 1", d.Spec.Replicas)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %q, want Recreate", d.Spec.Strategy.Type)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name":       "argocd-agent-agent",
		"app.kubernetes.io/part-of":    "argocd-agent-addon",
		"app.kubernetes.io/managed-by": "argocd-agent-addon",
	}
	for k, v := range wantLabels {
		if d.Labels[k] != v || d.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: deployment %q pod %q, want %q", k, d.Labels[k], d.Spec.Template.Labels[k], v)
		}
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels", k, v)
		}
	}

	pod := d.Spec.Template.Spec
	if pod.ShareProcessNamespace == nil || !*pod.ShareProcessNamespace {
		t.Errorf("shareProcessNamespace must be true so the reloader can signal the agent")
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 999 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}

	// OCM adds the client-certificate volume and mounts itself.
	certDir := ClientCertMountDir(in.SignerName)
	if len(pod.Volumes) != 0 {
		t.Errorf("template declares volumes %+v; the cert volume must come from OCM", pod.Volumes)
	}
	for _, c := range pod.Containers {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/managed") {
				t.Errorf("container %s mounts %s itself", c.Name, m.MountPath)
			}
		}
		for _, e := range c.Env {
			if e.Name == VarClusterName || e.Name == VarInstallNamespace || e.Name == VarHubKubeconfig {
				t.Errorf("container %s declares env %s, which OCM appends itself", c.Name, e.Name)
			}
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			(sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
		if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != 999 {
			t.Errorf("container %s runs as %d, both containers must share UID 999", c.Name, *sc.RunAsUser)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() ||
			c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("container %s resources %+v incomplete", c.Name, c.Resources)
		}
	}

	agent, reloader := pod.Containers[0], pod.Containers[1]
	if agent.Name != "argocd-agent-agent" || reloader.Name != "cert-reloader" {
		t.Fatalf("containers %q, %q", agent.Name, reloader.Name)
	}
	for _, want := range []string{"--tls-client-cert=" + certDir + "/tls.crt", "--tls-client-key=" + certDir + "/tls.key"} {
		if !slices.Contains(agent.Args, want) {
			t.Errorf("agent args %v lack %q", agent.Args, want)
		}
	}
	if certDir != "/managed/open-cluster-management.io-argocd-agent-addon" {
		t.Errorf("cert dir %q", certDir)
	}
	wantReloader := []string{"tools", "cert-reloader", "--watch-dir", certDir, "--process-name", "argocd-agent"}
	if !slices.Equal(reloader.Args, wantReloader) {
		t.Errorf("reloader args %v, want %v", reloader.Args, wantReloader)
	}
	if len(reloader.Command) != 0 || len(agent.Command) != 0 {
		t.Errorf("containers must keep their images' entrypoints")
	}

	var redis *corev1.EnvVar
	for i := range agent.Env {
		if agent.Env[i].Name == "REDIS_PASSWORD" {
			redis = &agent.Env[i]
		}
	}
	if redis == nil || redis.ValueFrom == nil || redis.ValueFrom.SecretKeyRef == nil ||
		redis.ValueFrom.SecretKeyRef.Name != "argocd-redis" || redis.ValueFrom.SecretKeyRef.Key != "auth" ||
		redis.ValueFrom.SecretKeyRef.Optional == nil || !*redis.ValueFrom.SecretKeyRef.Optional {
		t.Errorf("REDIS_PASSWORD env %+v", redis)
	}

	healthz := -1
	for _, p := range agent.Ports {
		if p.Name == "healthz" {
			healthz = int(p.ContainerPort)
		}
	}
	if healthz != HealthzPort || !slices.Contains(agent.Args, "--healthz-port=8002") {
		t.Errorf("healthz port %d, args %v", healthz, agent.Args)
	}
	rp, lp := agent.ReadinessProbe, agent.LivenessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/healthz" || rp.HTTPGet.Port.String() != "healthz" {
		t.Errorf("readiness probe %+v", rp)
	}
	if lp == nil || lp.TCPSocket == nil || lp.TCPSocket.Port.String() != "healthz" {
		t.Errorf("liveness probe %+v", lp)
	}
}

func TestNamesDerivedFromSigner(t *testing.T) {
	if got := ClientCertSecretName(DefaultAddonName, DefaultSignerName); got != "argocd-agent-addon-open-cluster-management.io-argocd-agent-addon-client-cert" {
		t.Errorf("ClientCertSecretName = %q", got)
	}
	if got := ClientCertSecretName("a", "example.com/x"); got != "a-example.com-x-client-cert" {
		t.Errorf("ClientCertSecretName = %q", got)
	}
	if got := ClientCertMountDir("example.com/x"); got != "/managed/example.com-x" {
		t.Errorf("ClientCertMountDir = %q", got)
	}
	if got := clientCertVolumeName(DefaultSignerName); got != "cert-open-cluster-management-io-argocd-agent-addon" {
		t.Errorf("clientCertVolumeName = %q", got)
	}
}

func TestBuildAddOnTemplateRejectsBadInput(t *testing.T) {
	keyPEM := []byte("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n")
	cases := map[string]func(*TemplateInput){
		"empty addon name":      func(in *TemplateInput) { in.AddonName = "" },
		"addon name uppercase":  func(in *TemplateInput) { in.AddonName = "ArgoCD" },
		"empty template name":   func(in *TemplateInput) { in.TemplateName = "" },
		"signer without slash":  func(in *TemplateInput) { in.SignerName = "open-cluster-management.io" },
		"signer with tag":       func(in *TemplateInput) { in.SignerName = "example.com/{{x}}" },
		"bad signing ca ns":     func(in *TemplateInput) { in.SigningCANamespace = "Bad_NS" },
		"empty ca bundle":       func(in *TemplateInput) { in.CABundlePEM = nil },
		"garbage ca bundle":     func(in *TemplateInput) { in.CABundlePEM = []byte("not a pem") },
		"private key in bundle": func(in *TemplateInput) { in.CABundlePEM = append(append([]byte(nil), in.CABundlePEM...), keyPEM...) },
		"trailing garbage":      func(in *TemplateInput) { in.CABundlePEM = append(append([]byte(nil), in.CABundlePEM...), "junk"...) },
		"bad cert bytes": func(in *TemplateInput) {
			in.CABundlePEM = []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
		},
		"unknown mode": func(in *TemplateInput) { in.Mode = "hybrid" },
		"empty mode":   func(in *TemplateInput) { in.Mode = "" },
		"destination mapping in autonomous mode": func(in *TemplateInput) {
			in.Mode, in.DestinationBasedMapping = ModeAutonomous, true
		},
		"secret name too long": func(in *TemplateInput) {
			in.SignerName = "example.com/" + strings.Repeat("a", 250)
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := validTemplateInput(t)
			mutate(&in)
			if tpl, err := BuildAddOnTemplate(in); err == nil {
				t.Fatalf("accepted bad input, got template %s", tpl.Name)
			}
		})
	}
	// And the valid input really is valid, so the cases above fail for
	// their own reason.
	if _, err := BuildAddOnTemplate(validTemplateInput(t)); err != nil {
		t.Fatal(err)
	}
}

// decorateNamespaceLikeOCM applies what OCM's template addon does after substitution when the
// ADC sets agentInstallNamespace: every object with a namespace moves to it, and so do the
// Namespace object's name and the subjects of (Cluster)RoleBindings.
func decorateNamespaceLikeOCM(t *testing.T, manifest, installNS string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	if ns, _ := meta["namespace"].(string); ns != "" {
		meta["namespace"] = installNS
	}
	switch obj["kind"] {
	case "Namespace":
		meta["name"] = installNS
	case "RoleBinding", "ClusterRoleBinding":
		subjects, _ := obj["subjects"].([]any)
		for _, s := range subjects {
			s.(map[string]any)["namespace"] = installNS
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestImagePullSecretsReachTheAgentPod(t *testing.T) {
	in := validTemplateInput(t)
	in.ImagePullSecrets = []string{"regcred"}
	r := renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput()))
	if got := r.deployment.Spec.Template.Spec.ImagePullSecrets; len(got) != 1 || got[0].Name != "regcred" {
		t.Errorf("agent pod imagePullSecrets %v, want [regcred]", got)
	}
	in.ImagePullSecrets = []string{"Not A Name"}
	if _, err := BuildAddOnTemplate(in); err == nil {
		t.Error("an invalid pull secret name was accepted")
	}
	in.ImagePullSecrets = nil
	r = renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput()))
	if got := r.deployment.Spec.Template.Spec.ImagePullSecrets; len(got) != 0 {
		t.Errorf("no pull secrets configured, pod has %v", got)
	}
}

// TestDestinationBasedMappingOnlyWhenAsked: the agent's flag and the cluster-wide list and
// watch of Applications its informer then needs come with DestinationBasedMapping and not
// without; nothing else changes, and the agent still writes only in its own namespace.
func TestDestinationBasedMappingOnlyWhenAsked(t *testing.T) {
	const flag = "--destination-based-mapping=true"
	render := func(dbm bool) renderedTemplate {
		in := validTemplateInput(t)
		in.DestinationBasedMapping = dbm
		return renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput()))
	}
	agentArgs := func(r renderedTemplate) []string {
		for _, c := range r.deployment.Spec.Template.Spec.Containers {
			if c.Name == AgentContainerName {
				return c.Args
			}
		}
		t.Fatal("no agent container")
		return nil
	}
	off, on := render(false), render(true)

	if args := agentArgs(off); slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "destination-based-mapping") }) {
		t.Errorf("namespace mapping: agent args %v name destination-based mapping", args)
	}
	if args := agentArgs(on); !slices.Contains(args, flag) {
		t.Errorf("destination mapping: agent args %v lack %s", args, flag)
	}
	for _, a := range agentArgs(on) {
		if strings.HasPrefix(a, "--create-namespace") || strings.HasPrefix(a, "--allowed-namespaces") {
			t.Errorf("destination mapping: agent arg %s lets the agent write outside its namespace", a)
		}
	}

	if got := verbsFor(off.clusterRole.Rules, "argoproj.io", "applications"); !slices.Equal(got, []string{"get"}) {
		t.Errorf("namespace mapping: cluster-wide applications verbs %v, want [get]", got)
	}
	if got := verbsFor(on.clusterRole.Rules, "argoproj.io", "applications"); !slices.Equal(got, []string{"get", "list", "watch"}) {
		t.Errorf("destination mapping: cluster-wide applications verbs %v, want [get list watch]", got)
	}
	if !reflect.DeepEqual(off.role.Rules, on.role.Rules) {
		t.Errorf("destination mapping changed the namespaced Role: %+v, want %+v", on.role.Rules, off.role.Rules)
	}
	for _, rule := range on.clusterRole.Rules {
		for _, v := range rule.Verbs {
			if v != "get" && v != "list" && v != "watch" {
				t.Errorf("destination mapping: cluster role rule %+v writes cluster-wide", rule)
			}
		}
	}
}

// TestManagedAgentIgnoresUnmanagedApplications: in managed mode the agent runs with
// --ignore-unmanaged-apps=true, so that the spoke's own and the basic pull model's Applications
// in its namespace never reach the principal (which would write their status onto hub
// Applications of the same name); an autonomous agent, the source of its Applications, keeps
// reporting them.
func TestManagedAgentIgnoresUnmanagedApplications(t *testing.T) {
	for mode, want := range map[string]string{ModeManaged: "--ignore-unmanaged-apps=true", ModeAutonomous: "--ignore-unmanaged-apps=false"} {
		adc := validADCInput()
		adc.Mode = mode
		r := renderTemplate(t, mustTemplate(t, validTemplateInput(t)), mustADC(t, adc))
		var args []string
		for _, c := range r.deployment.Spec.Template.Spec.Containers {
			if c.Name == AgentContainerName {
				args = c.Args
			}
		}
		if !slices.Contains(args, want) {
			t.Errorf("%s: agent args %v lack %s", mode, args, want)
		}
	}
}

// TestAssignedUserIDs: for OpenShift's restricted-v2 the agent's pod names no UID or GID (the
// platform assigns one in the namespace's range) and stays non-root; by default it runs as the
// image's user.
func TestAssignedUserIDs(t *testing.T) {
	in := validTemplateInput(t)
	fixed := renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput())).deployment.Spec.Template.Spec.SecurityContext
	if fixed.RunAsUser == nil || *fixed.RunAsUser != AgentRunAsUser {
		t.Errorf("default: runAsUser %v, want %d", fixed.RunAsUser, AgentRunAsUser)
	}
	in.AssignedUserIDs = true
	d := renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput())).deployment
	sc := d.Spec.Template.Spec.SecurityContext
	if sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("assigned: pod security context %+v", sc)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.SecurityContext != nil && (c.SecurityContext.RunAsUser != nil || c.SecurityContext.RunAsGroup != nil) {
			t.Errorf("assigned: container %s names a UID: %+v", c.Name, c.SecurityContext)
		}
	}
}

// TestRedisOfAnExistingArgoCD: the agent dials the redis it is given and reads the password
// from the Secret key it is given (an operator-made Argo CD names them after its ArgoCD
// object); by default Argo CD's own argocd-redis.
func TestRedisOfAnExistingArgoCD(t *testing.T) {
	agent := func(in TemplateInput) corev1.Container {
		for _, c := range renderTemplate(t, mustTemplate(t, in), mustADC(t, validADCInput())).deployment.Spec.Template.Spec.Containers {
			if c.Name == AgentContainerName {
				return c
			}
		}
		t.Fatal("no agent container")
		return corev1.Container{}
	}
	in := validTemplateInput(t)
	c := agent(in)
	if !slices.Contains(c.Args, "--redis-addr=argocd-redis:6379") || c.Env[0].ValueFrom.SecretKeyRef.Name != "argocd-redis" || c.Env[0].ValueFrom.SecretKeyRef.Key != "auth" {
		t.Errorf("default: args %v env %+v", c.Args, c.Env[0].ValueFrom.SecretKeyRef)
	}
	in.Redis = Redis{Address: "example-argocd-redis:6379", SecretName: "example-argocd-redis-initial-password", SecretKey: "admin.password"}
	c = agent(in)
	if !slices.Contains(c.Args, "--redis-addr=example-argocd-redis:6379") || c.Env[0].ValueFrom.SecretKeyRef.Name != "example-argocd-redis-initial-password" || c.Env[0].ValueFrom.SecretKeyRef.Key != "admin.password" {
		t.Errorf("operator's redis: args %v env %+v", c.Args, c.Env[0].ValueFrom.SecretKeyRef)
	}
}
