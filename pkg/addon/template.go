package addon

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// TemplateInput is everything the AddOnTemplate depends on. Values that are
// the same on every cluster but may change without a new template (principal
// address, images, ...) live in the ADC instead; see BuildDeploymentConfig.
type TemplateInput struct {
	// AddonName is the CMA name; SignerName the CustomSigner name of the
	// agents' client certificates; TemplateName the AddOnTemplate's name.
	AddonName, TemplateName, SignerName string
	// SigningCANamespace is the namespace of registration[0].customSigner.signingCA, whose
	// name is always UnreadableSigningCAName.
	SigningCANamespace string
	// CABundlePEM is delivered as ca.crt of the spoke's argocd-agent-ca secret
	// and is what the agent uses to verify the principal.
	CABundlePEM []byte
	// Mode is "managed" or "autonomous"; it selects the agent's RBAC verbs.
	Mode string
	// ImagePullSecrets are added to the agent pod; the Secrets must exist in the agent namespace.
	ImagePullSecrets []string
	// DestinationBasedMapping runs the agent with --destination-based-mapping (managed mode
	// only), for a principal that routes Applications by spec.destination.name.
	DestinationBasedMapping bool
	// AssignedUserIDs leaves the pod's UID and GID to the platform (OpenShift).
	AssignedUserIDs bool
	// Redis is where the agent finds Argo CD's redis; empty fields take RedisAddress,
	// RedisSecretName and RedisSecretKey.
	Redis Redis
}

// Redis is the address of Argo CD's redis and the Secret key holding its password.
type Redis struct {
	Address, SecretName, SecretKey string
}

func (r Redis) withDefaults() Redis {
	if r.Address == "" {
		r.Address = RedisAddress
	}
	if r.SecretName == "" {
		r.SecretName = RedisSecretName
	}
	if r.SecretKey == "" {
		r.SecretKey = RedisSecretKey
	}
	return r
}

// UnreadableSigningCAName is the signingCA the template names: a Secret of that name cannot
// exist (Secret names are lower-case DNS subdomains). OCM's addon-manager approves every CSR of
// a CustomSigner registration and signs it itself with the signingCA as soon as it can read
// that Secret, without checking who asks for what. Naming the real hub CA would let one
// RoleBinding hand any managed cluster a certificate of any subject, never recorded; this
// project's signer reads the CA from the principal namespace instead.
const UnreadableSigningCAName = "NOT_FOR_OCM.argocd-agent-addon.signer-only"

// BuildAddOnTemplate renders the AddOnTemplate that installs the argocd-agent
// agent: namespace, service account, root CA secret, least-privilege RBAC and
// the agent Deployment with its cert-reloader sidecar, plus one CustomSigner
// registration through which OCM issues and mounts the agent's client cert.
func BuildAddOnTemplate(in TemplateInput) (*addonv1alpha1.AddOnTemplate, error) {
	if err := validateTemplateInput(in); err != nil {
		return nil, err
	}

	objs := []runtime.Object{
		installNamespace(),
		serviceAccount(),
		caSecret(in.CABundlePEM),
		role(in.Mode),
		roleBinding(),
		clusterRole(in.AddonName, in.Mode, in.DestinationBasedMapping),
		clusterRoleBinding(in.AddonName),
		deployment(in.SignerName, in.ImagePullSecrets, in.DestinationBasedMapping, in.AssignedUserIDs, in.Redis.withDefaults()),
	}
	manifests := make([]workv1.Manifest, 0, len(objs))
	for _, obj := range objs {
		raw, err := manifestJSON(obj)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
	}

	return &addonv1alpha1.AddOnTemplate{
		TypeMeta: metav1.TypeMeta{
			APIVersion: addonv1alpha1.GroupVersion.String(),
			Kind:       "AddOnTemplate",
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:   in.TemplateName,
			Labels: hubLabels(),
		},
		Spec: addonv1alpha1.AddOnTemplateSpec{
			AddonName: in.AddonName,
			AgentSpec: workv1.ManifestWorkSpec{
				Workload: workv1.ManifestsTemplate{Manifests: manifests},
			},
			Registration: []addonv1alpha1.RegistrationSpec{{
				Type: addonv1alpha1.RegistrationTypeCustomSigner,
				CustomSigner: &addonv1alpha1.CustomSignerRegistrationConfig{
					SignerName: in.SignerName,
					// No subject: OCM's default, the only one the signer issues.
					SigningCA: addonv1alpha1.SigningCARef{
						Name:      UnreadableSigningCAName,
						Namespace: in.SigningCANamespace,
					},
				},
			}},
		},
	}, nil
}

func validateTemplateInput(in TemplateInput) error {
	if err := validateAddonName(in.AddonName); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(in.TemplateName); len(errs) > 0 {
		return fmt.Errorf("template name %q is invalid: %s", in.TemplateName, strings.Join(errs, "; "))
	}
	if err := validateSignerName(in.AddonName, in.SignerName); err != nil {
		return err
	}
	if in.SigningCANamespace != "" {
		if errs := validation.IsDNS1123Label(in.SigningCANamespace); len(errs) > 0 {
			return fmt.Errorf("signing CA secret namespace %q is invalid: %s", in.SigningCANamespace, strings.Join(errs, "; "))
		}
	}
	if err := validateCABundle(in.CABundlePEM); err != nil {
		return err
	}
	if err := validateMode(in.Mode); err != nil {
		return err
	}
	// argocd-agent's NewAgent (v0.9.0 and v0.10.0) refuses to start with both.
	if in.DestinationBasedMapping && in.Mode == ModeAutonomous {
		return fmt.Errorf("destination-based mapping needs managed mode")
	}
	for _, name := range in.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("image pull secret name %q is invalid: %s", name, strings.Join(errs, "; "))
		}
	}
	return nil
}

// validateCABundle insists on one or more PEM certificates and nothing else,
// because the agent fails at start-up on anything it cannot parse, on every
// cluster at once.
func validateCABundle(bundle []byte) error {
	rest := bundle
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("CA bundle holds a %q PEM block, only CERTIFICATE blocks are allowed", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("CA bundle certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("CA bundle holds no PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return fmt.Errorf("CA bundle has trailing data that is not a PEM certificate")
	}
	return nil
}

// manifestJSON turns a typed object into the raw JSON of a template manifest.
// Going through a generic map drops the empty status and sorts every key, so
// the bytes depend on the content only.
func manifestJSON(obj runtime.Object) ([]byte, error) {
	typed, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", obj, err)
	}
	dec := json.NewDecoder(bytes.NewReader(typed))
	dec.UseNumber()
	var m map[string]interface{}
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	delete(m, "status")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func spokeLabels() map[string]string {
	return map[string]string{
		LabelName:      AgentName,
		LabelPartOf:    PartOfValue,
		LabelManagedBy: v1alpha1.ManagedByValue,
	}
}

// namespacedMeta uses a literal namespace: the AddOnTemplate API validates metadata.namespace
// as a DNS label, so a {{tag}} is refused there. OCM's template addon rewrites the namespace
// of every namespaced object, the Namespace's name and binding subjects to the ADC's
// agentInstallNamespace, which this project always sets.
func namespacedMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: DefaultAgentInstallNamespace, Labels: spokeLabels()}
}

// installNamespace makes sure the namespace exists before OCM's registration
// agent stores the client certificate there. The install namespace is
// usually Argo CD's own, so it is orphaned on addon removal: uninstalling the
// agent must never delete Argo CD. It carries no labels of ours for the same
// reason: the namespace is not ours.
func installNamespace() *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        DefaultAgentInstallNamespace,
			Annotations: map[string]string{addonv1alpha1.DeletionOrphanAnnotationKey: ""},
		},
	}
}

func serviceAccount() *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: namespacedMeta(AgentName),
	}
}

// caSecret carries the hub CA as a literal: substituted variables are not
// JSON-escaped and could not hold a PEM's newlines, while Secret data is
// base64 in JSON and safe as literal text.
func caSecret(caPEM []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: namespacedMeta(SpokeCASecretName),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{SpokeCASecretKey: append([]byte(nil), caPEM...)},
	}
}

var (
	readWriteVerbs = []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	// Without create: in autonomous mode argocd-agent (v0.9.0, v0.10.0) discards every
	// incoming create of applications, appprojects and repository secrets and
	// ignores GPG key configmaps (agent/inbound.go), but it still updates
	// (operations) and deletes (hub-requested) existing ones.
	autonomousVerbs = []string{"delete", "get", "list", "patch", "update", "watch"}
)

// role grants what argocd-agent calls in its own namespace (--namespace), the same in v0.9.0 and
// v0.10.0 (docs/compatibility.md lists the calls of each release and where they are made):
//
//   - applications, appprojects: list+watch (its informers, both modes); get, update, patch,
//     delete (changes the principal sends: agent/inbound.go); create in managed mode only
//     (createApplication, processIncomingAppProject).
//   - secrets: list+watch (repository informer), get (the argocd-agent-ca root CA secret),
//     and the same writes as applications for repository secrets (processIncomingRepository).
//   - configmaps: the same writes for the GPG keys ConfigMap (processIncomingGPGKey), and
//     list+watch for its GPG-key informer.
//   - events: create (its event recorder) and list (the resource proxy lists events, the only
//     LIST it answers).
//
// applicationsets are not here: the agent never calls them; in autonomous mode the spoke's own
// applicationset-controller handles them.
func role(mode string) *rbacv1.Role {
	verbs := readWriteVerbs
	if mode == ModeAutonomous {
		verbs = autonomousVerbs
	}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: namespacedMeta(AgentName),
		Rules: []rbacv1.PolicyRule{
			{
				APIGroups: []string{"argoproj.io"},
				Resources: []string{"applications", "appprojects"},
				Verbs:     append([]string(nil), verbs...),
			},
			{
				APIGroups: []string{""},
				Resources: []string{"configmaps", "secrets"},
				Verbs:     append([]string(nil), verbs...),
			},
			{
				APIGroups: []string{""},
				Resources: []string{"events"},
				Verbs:     []string{"create", "list"},
			},
		},
	}
}

func roleBinding() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: namespacedMeta(AgentName),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: AgentName},
		Subjects:   []rbacv1.Subject{agentSubject()},
	}
}

// clusterRole grants what argocd-agent (v0.9.0 and v0.10.0) calls outside its namespace:
//
//   - namespaces: list+watch (its namespace informer, both modes).
//   - applications: get, cluster-wide, in managed mode: on every (re)connect the agent resyncs
//     by GETting each Application the principal holds for it, addressed in the hub namespace
//     named after the agent (internal/resync), which need not exist on the spoke. Without it
//     an Application deleted on the spoke while disconnected is never restored.
//   - applications: list+watch, cluster-wide, with destination-based mapping: the agent's
//     application informer then watches every namespace and populateSourceCache lists them
//     all (agent/agent.go). Its writes stay in its own namespace: an Application from the
//     principal's namespace is stored in the agent's (getTargetNamespaceForApp), and one from
//     any other namespace is refused unless --allowed-namespaces names it, which this addon
//     does not set.
//   - every resource: get, and events: list. The resource proxy answers the hub Argo CD's
//     requests for live objects with a dynamic GET of the named object (it refuses objects
//     Argo CD does not manage) and lists nothing but events.
//
// Not granted, although argocd-agent's own install manifests do: namespace create and
// cluster-wide application writes (destination-based mapping with --create-namespace or
// --allowed-namespaces, which this addon does not set), and writes through the resource proxy
// (hub UI actions such as deleting a live object): the spoke's application-controller owns
// those objects.
func clusterRole(addonName, mode string, destinationBasedMapping bool) *rbacv1.ClusterRole {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
	}
	if mode != ModeAutonomous {
		verbs := []string{"get"}
		if destinationBasedMapping {
			verbs = []string{"get", "list", "watch"}
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: verbs})
	}
	rules = append(rules,
		rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
	)
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: clusterScopedName(addonName), Labels: spokeLabels()},
		Rules:      rules,
	}
}

func clusterRoleBinding(addonName string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: clusterScopedName(addonName), Labels: spokeLabels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterScopedName(addonName)},
		Subjects:   []rbacv1.Subject{agentSubject()},
	}
}

func agentSubject() rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: AgentName, Namespace: DefaultAgentInstallNamespace}
}

// agentArgs configures argocd-agent by flags (cmd/argocd-agent/agent.go) that v0.9.0 and v0.10.0
// both have: one template serves agents of either release, and during a version change (which
// rolls out by the AddOnDeploymentConfig's image) a cluster not yet released renders the same
// template with the old image, which refuses a flag it does not know. The client cert comes
// from the files OCM mounts for the CustomSigner registration; the root CA from the
// argocd-agent-ca secret.
func agentArgs(signerName string, destinationBasedMapping bool, redisAddress string) []string {
	dir := ClientCertMountDir(signerName)
	args := []string{
		"agent",
		"--agent-mode=" + tag(VarMode),
		"--server-address=" + tag(VarServerAddress),
		"--server-port=" + tag(VarServerPort),
		"--creds=mtls:any",
		"--namespace=" + tag(VarInstallNamespace),
		"--root-ca-secret-name=" + SpokeCASecretName,
		"--tls-client-cert=" + dir + "/tls.crt",
		"--tls-client-key=" + dir + "/tls.key",
		"--redis-addr=" + redisAddress,
		"--log-level=" + tag(VarLogLevel),
		"--ignore-unmanaged-apps=" + tag(VarIgnoreUnmanagedApps),
		fmt.Sprintf("--healthz-port=%d", HealthzPort),
		fmt.Sprintf("--metrics-port=%d", MetricsPort),
	}
	if destinationBasedMapping {
		args = append(args, "--destination-based-mapping=true")
	}
	return args
}

func reloaderArgs(signerName string) []string {
	return []string{
		"tools", "cert-reloader",
		"--watch-dir", ClientCertMountDir(signerName),
		"--process-name", AgentProcessName,
	}
}

func restrictedContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func resources(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuReq),
			corev1.ResourceMemory: resource.MustParse(memReq),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuLim),
			corev1.ResourceMemory: resource.MustParse(memLim),
		},
	}
}

// deployment runs one agent per cluster (Recreate: the principal accepts one
// connection per agent name) next to a cert-reloader sidecar. argocd-agent
// reads its certificate only at start-up, so the reloader, sharing the pod's
// process namespace and UID, sends SIGTERM to the agent when the mounted
// certificate changes and the kubelet restarts the agent container.
//
// The client-certificate volume is deliberately absent: OCM adds it, and the
// mount at ClientCertMountDir, to every container of the Deployment.
//
// It is one object literal, read top to bottom as the Deployment it makes, hence its length.
func deployment(signerName string, pullSecrets []string, destinationBasedMapping, assignedUserIDs bool, redis Redis) *appsv1.Deployment {
	selector := map[string]string{LabelName: AgentName, LabelPartOf: PartOfValue}
	podLabels := spokeLabels()
	podLabels[LabelComponent] = "agent"

	agent := corev1.Container{
		Name:            AgentContainerName,
		Image:           tag(VarAgentImage),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            agentArgs(signerName, destinationBasedMapping, redis.Address),
		Env: []corev1.EnvVar{{
			Name: "REDIS_PASSWORD",
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: redis.SecretName},
				Key:                  redis.SecretKey,
				Optional:             ptr.To(true),
			}},
		}, {
			// argocd-agent v0.10.0 adopts by default an Application the principal sends when one
			// of that name already exists in its namespace: the cluster's own, or one the basic
			// pull model delivered, which OCM's work agent keeps applying. Never adopting keeps
			// v0.9.0's behaviour (it left them alone) and reports the clash to the principal. An
			// environment variable, not the flag: v0.9.0 ignores it, and refuses the flag.
			Name:  AdoptionPolicyEnv,
			Value: AdoptionPolicyNever,
		}},
		Ports: []corev1.ContainerPort{
			{Name: "healthz", ContainerPort: HealthzPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		// /healthz answers 200 only while connected to the principal, so it
		// gates readiness (and thereby OCM's Available condition). Liveness
		// only checks that the server answers at all, so an unreachable
		// principal does not turn into a restart loop; the agent reconnects
		// by itself.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromString("healthz"), Scheme: corev1.URISchemeHTTP,
			}},
			InitialDelaySeconds: 5,
			PeriodSeconds:       10,
			TimeoutSeconds:      2,
			FailureThreshold:    3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
				Port: intstr.FromString("healthz"),
			}},
			// The health server starts after the agent's informers have
			// synced (up to 10s each by default).
			InitialDelaySeconds: 30,
			PeriodSeconds:       10,
			TimeoutSeconds:      2,
			FailureThreshold:    6,
		},
		Resources:       resources("100m", "128Mi", "500m", "512Mi"),
		SecurityContext: restrictedContainerSecurityContext(),
	}

	reloader := corev1.Container{
		Name:            ReloaderContainerName,
		Image:           tag(VarReloaderImage),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            reloaderArgs(signerName),
		Resources:       resources("10m", "16Mi", "50m", "64Mi"),
		SecurityContext: restrictedContainerSecurityContext(),
	}

	podSecurity := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](AgentRunAsUser),
		RunAsGroup:     ptr.To[int64](AgentRunAsUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if assignedUserIDs {
		podSecurity.RunAsUser, podSecurity.RunAsGroup = nil, nil
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "Deployment"},
		ObjectMeta: namespacedMeta(AgentName),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName:    AgentName,
					ShareProcessNamespace: ptr.To(true),
					SecurityContext:       podSecurity,
					Containers:            []corev1.Container{agent, reloader},
					ImagePullSecrets:      pullSecretRefs(pullSecrets),
				},
			},
		},
	}
}

func pullSecretRefs(names []string) []corev1.LocalObjectReference {
	var refs []corev1.LocalObjectReference
	for _, n := range names {
		refs = append(refs, corev1.LocalObjectReference{Name: n})
	}
	return refs
}
