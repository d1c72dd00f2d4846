package addon

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults the caller may use; builders never fall back to them for the addon
// or signer name so that a second installation can choose its own.
const (
	// DefaultAddonName is the usual name of the ClusterManagementAddOn.
	DefaultAddonName = "argocd-agent-addon"
	// DefaultSignerName is the usual CustomSigner name for agent client certs.
	DefaultSignerName = "open-cluster-management.io/argocd-agent-addon"
	// DefaultAgentInstallNamespace is where Argo CD runs on the spokes.
	DefaultAgentInstallNamespace = "argocd"
	// DefaultLogLevel is the agent log level when none is given.
	DefaultLogLevel = "info"
)

// Names of the objects rendered onto the spoke.
const (
	// AgentName names the Deployment, ServiceAccount, Role and RoleBinding,
	// matching argocd-agent's own install manifests.
	AgentName = "argocd-agent-agent"
	// AgentContainerName is the argocd-agent container in the agent pod.
	AgentContainerName = "argocd-agent-agent"
	// ReloaderContainerName is the certificate-rotation sidecar.
	ReloaderContainerName = "cert-reloader"
	// SpokeCASecretName is the secret the agent reads its root CA from
	// (argocd-agent's default --root-ca-secret-name).
	SpokeCASecretName = "argocd-agent-ca"
	// SpokeCASecretKey is the only key of SpokeCASecretName: argocd-agent
	// parses every data field of that secret as a certificate.
	SpokeCASecretKey = "ca.crt"
	// RedisSecretName / RedisSecretKey hold the Argo CD redis password.
	RedisSecretName = "argocd-redis"
	RedisSecretKey  = "auth"
	// RedisAddress is Argo CD's redis service in the install namespace.
	RedisAddress = "argocd-redis:6379"
	// AgentProcessName is the process the reloader signals.
	AgentProcessName = "argocd-agent"
	// HealthzPort and MetricsPort are set explicitly on the agent because
	// argocd-agent's flag defaults (8001/8181, v0.9.0 and v0.10.0) and its
	// install manifests (8002) disagree.
	HealthzPort = 8002
	MetricsPort = 8181
	// AgentRunAsUser is the UID of the argocd-agent image (USER 999); the
	// reloader runs as the same UID so it may signal the agent process.
	AgentRunAsUser = 999
	// AdoptionPolicyEnv is argocd-agent v0.10.0's environment variable for its
	// --adoption-policy flag; AdoptionPolicyNever the value the agent runs with.
	AdoptionPolicyEnv   = "ARGOCD_AGENT_ADOPTION_POLICY"
	AdoptionPolicyNever = "never"
)

// Labels put on every spoke object and on the hub objects this package builds.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = v1alpha1.LabelManagedBy
	LabelComponent = "app.kubernetes.io/component"

	// PartOfValue is the value of LabelPartOf; LabelManagedBy's is v1alpha1.ManagedByValue.
	PartOfValue = "argocd-agent-addon"
)

// Agent modes accepted by argocd-agent.
const (
	ModeManaged    = "managed"
	ModeAutonomous = "autonomous"
)

// signerNamePattern is the CRD validation of customSigner.signerName.
var signerNamePattern = regexp.MustCompile(`^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$`)

// signerDir is the signer name as OCM turns it into a path segment.
func signerDir(signerName string) string {
	return strings.ReplaceAll(signerName, "/", "-")
}

// ClientCertSecretName is the spoke secret in which OCM's registration agent
// stores the client certificate issued for a CustomSigner registration.
func ClientCertSecretName(addonName, signerName string) string {
	return fmt.Sprintf("%s-%s-client-cert", addonName, signerDir(signerName))
}

// ClientCertMountDir is where OCM mounts ClientCertSecretName into every
// container of every Deployment of the template (files tls.crt and tls.key).
func ClientCertMountDir(signerName string) string {
	return "/managed/" + signerDir(signerName)
}

// clientCertVolumeName is the volume name OCM uses for that mount; the
// template must not declare a volume of this name itself.
func clientCertVolumeName(signerName string) string {
	return "cert-" + strings.ReplaceAll(signerDir(signerName), ".", "-")
}

// clusterScopedName makes cluster-scoped RBAC names unique per addon and
// install namespace. ':' cannot occur in either part, so two different pairs
// never produce the same name.
func clusterScopedName(addonName string) string {
	return addonName + ":" + AgentName + ":" + tag(VarInstallNamespace)
}

func validateAddonName(addonName string) error {
	if addonName == "" {
		return fmt.Errorf("addon name is empty")
	}
	if errs := validation.IsDNS1123Label(addonName); len(errs) > 0 {
		return fmt.Errorf("addon name %q is invalid: %s", addonName, strings.Join(errs, "; "))
	}
	return nil
}

func validateSignerName(addonName, signerName string) error {
	if len(signerName) < 5 || len(signerName) > 571 || !signerNamePattern.MatchString(signerName) {
		return fmt.Errorf("signer name %q is invalid: it must match %s (5 to 571 characters)", signerName, signerNamePattern)
	}
	secret := ClientCertSecretName(addonName, signerName)
	if errs := validation.IsDNS1123Subdomain(secret); len(errs) > 0 {
		return fmt.Errorf("client certificate secret name %q derived from addon %q and signer %q is invalid: %s",
			secret, addonName, signerName, strings.Join(errs, "; "))
	}
	return nil
}

func validateMode(mode string) error {
	switch mode {
	case ModeManaged, ModeAutonomous:
		return nil
	default:
		return fmt.Errorf("agent mode %q is invalid: must be %q or %q", mode, ModeManaged, ModeAutonomous)
	}
}
