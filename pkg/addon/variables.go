package addon

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// Variables the ADC carries as customizedVariables. They hold what is the same
// on every cluster of one GitOpsCluster; the template refers to them as
// {{NAME}} tags.
const (
	VarServerAddress = "ARGOCD_AGENT_SERVER_ADDRESS"
	VarServerPort    = "ARGOCD_AGENT_SERVER_PORT"
	VarMode          = "ARGOCD_AGENT_MODE"
	VarAgentImage    = "ARGOCD_AGENT_IMAGE"
	VarReloaderImage = "CERT_RELOADER_IMAGE"
	VarLogLevel      = "ARGOCD_AGENT_LOG_LEVEL"
	// VarIgnoreUnmanagedApps is "true" in managed mode: the agent then leaves alone the
	// Applications of its namespace it did not get from the principal (the spoke's own, and
	// the basic pull model's), whose status the principal would otherwise try to write onto
	// hub Applications of the same name.
	VarIgnoreUnmanagedApps = "ARGOCD_AGENT_IGNORE_UNMANAGED_APPS"
	// VarArgoCDImage and VarRedisImage are the images of the Argo CD components (pkg/spoke).
	VarArgoCDImage = "ARGOCD_IMAGE"
	VarRedisImage  = "ARGOCD_REDIS_IMAGE"
)

// OCM built-in variables. OCM sets them itself and they override any
// customized variable of the same name.
const (
	VarClusterName      = "CLUSTER_NAME"
	VarInstallNamespace = "INSTALL_NAMESPACE"
	VarHubKubeconfig    = "HUB_KUBECONFIG"
)

// BuiltinVariables lists the OCM built-ins a template may use.
var BuiltinVariables = []string{VarClusterName, VarHubKubeconfig, VarInstallNamespace}

// MaxVariableValueLength is the ADC CRD bound on a customized variable value,
// applied to bytes, which is never looser than the CRD's character count.
const MaxVariableValueLength = 1024

var variableNamePattern = regexp.MustCompile(`^[a-zA-Z_][_a-zA-Z0-9]*$`)

// tag renders a variable reference exactly as OCM expects it: no spaces.
func tag(name string) string {
	return "{{" + name + "}}"
}

// ValidateVariable checks a customized variable against the ADC CRD rules and
// against what OCM's unescaped substitution can carry safely: the value lands
// inside a JSON string verbatim, so a quote, a backslash or a control
// character (newline, tab, ...) would break or alter the manifest, and "{{"
// would start a tag of its own.
func ValidateVariable(name, value string) error {
	if !variableNamePattern.MatchString(name) {
		return fmt.Errorf("variable name %q is invalid: must match %s", name, variableNamePattern)
	}
	for _, b := range BuiltinVariables {
		if name == b {
			return fmt.Errorf("variable name %q is reserved for OCM's built-in value", name)
		}
	}
	if len(value) > MaxVariableValueLength {
		return fmt.Errorf("variable %s is %d bytes long, at most %d are allowed", name, len(value), MaxVariableValueLength)
	}
	if !utf8.ValidString(value) {
		return fmt.Errorf("variable %s is not valid UTF-8", name)
	}
	if strings.Contains(value, "{{") {
		return fmt.Errorf("variable %s must not contain %q", name, "{{")
	}
	for _, r := range value {
		switch {
		case r == '"':
			return fmt.Errorf("variable %s must not contain a double quote", name)
		case r == '\\':
			return fmt.Errorf("variable %s must not contain a backslash", name)
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("variable %s must not contain control characters such as newlines (found %q)", name, r)
		}
	}
	return nil
}

// Variable returns the value of a customized variable of an AddOnDeploymentConfig, "" when it
// has none: for example the agent image (VarAgentImage), whose release picks the Argo CD
// components that go beside it.
func Variable(adc *addonv1alpha1.AddOnDeploymentConfig, name string) string {
	if adc == nil {
		return ""
	}
	for _, v := range adc.Spec.CustomizedVariables {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}
