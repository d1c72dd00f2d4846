package addon

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// DeploymentConfigInput is what one GitOpsCluster's agents share on every
// cluster.
type DeploymentConfigInput struct {
	// Name and Namespace of the AddOnDeploymentConfig on the hub.
	Name, Namespace string
	// AgentInstallNamespace is where Argo CD runs on the spoke and where the
	// agent is installed; empty means DefaultAgentInstallNamespace.
	AgentInstallNamespace string
	// ServerAddress is the principal's host name or IP, without scheme or port.
	ServerAddress string
	// ServerPort is the principal's port.
	ServerPort int32
	// Mode is "managed" or "autonomous".
	Mode string
	// AgentImage is the argocd-agent image; ReloaderImage is this project's
	// image, which runs the cert-reloader sidecar.
	AgentImage, ReloaderImage string
	// LogLevel is the agent's --log-level; empty means DefaultLogLevel.
	LogLevel string
	// ArgoCDImage and RedisImage are the images of the Argo CD components the addon installs
	// beside the agent; both empty when it installs none.
	ArgoCDImage, RedisImage string
}

// BuildDeploymentConfig returns the AddOnDeploymentConfig that carries the
// shared agent settings as customizedVariables (sorted by name) and always
// sets agentInstallNamespace, so that OCM defines {{INSTALL_NAMESPACE}}.
func BuildDeploymentConfig(in DeploymentConfigInput) (*addonv1alpha1.AddOnDeploymentConfig, error) {
	if errs := validation.IsDNS1123Subdomain(in.Name); len(errs) > 0 {
		return nil, fmt.Errorf("deployment config name %q is invalid: %s", in.Name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(in.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("deployment config namespace %q is invalid: %s", in.Namespace, strings.Join(errs, "; "))
	}
	installNS := in.AgentInstallNamespace
	if installNS == "" {
		installNS = DefaultAgentInstallNamespace
	}
	if errs := validation.IsDNS1123Label(installNS); len(errs) > 0 {
		return nil, fmt.Errorf("agent install namespace %q is invalid: %s", installNS, strings.Join(errs, "; "))
	}
	if err := validateServerAddress(in.ServerAddress); err != nil {
		return nil, err
	}
	if in.ServerPort < 1 || in.ServerPort > 65535 {
		return nil, fmt.Errorf("principal server port %d is out of range 1-65535", in.ServerPort)
	}
	if err := validateMode(in.Mode); err != nil {
		return nil, err
	}
	if err := validateImage("agent image", in.AgentImage); err != nil {
		return nil, err
	}
	if err := validateImage("cert-reloader image", in.ReloaderImage); err != nil {
		return nil, err
	}
	logLevel := in.LogLevel
	if logLevel == "" {
		logLevel = DefaultLogLevel
	}
	if err := validateLogLevel(logLevel); err != nil {
		return nil, err
	}

	vars := []addonv1alpha1.CustomizedVariable{
		{Name: VarServerAddress, Value: in.ServerAddress},
		{Name: VarServerPort, Value: strconv.Itoa(int(in.ServerPort))},
		{Name: VarMode, Value: in.Mode},
		{Name: VarAgentImage, Value: in.AgentImage},
		{Name: VarReloaderImage, Value: in.ReloaderImage},
		{Name: VarLogLevel, Value: logLevel},
		{Name: VarIgnoreUnmanagedApps, Value: strconv.FormatBool(in.Mode == ModeManaged)},
	}
	if in.ArgoCDImage != "" || in.RedisImage != "" {
		if err := validateImage("Argo CD image", in.ArgoCDImage); err != nil {
			return nil, err
		}
		if err := validateImage("redis image", in.RedisImage); err != nil {
			return nil, err
		}
		vars = append(vars,
			addonv1alpha1.CustomizedVariable{Name: VarArgoCDImage, Value: in.ArgoCDImage},
			addonv1alpha1.CustomizedVariable{Name: VarRedisImage, Value: in.RedisImage})
	}
	// The typed checks above are stricter; this is the last line of defence
	// that keeps every value safe for OCM's unescaped substitution.
	for _, v := range vars {
		if err := ValidateVariable(v.Name, v.Value); err != nil {
			return nil, err
		}
	}
	sort.Slice(vars, func(i, j int) bool { return vars[i].Name < vars[j].Name })

	return &addonv1alpha1.AddOnDeploymentConfig{
		TypeMeta: metav1.TypeMeta{
			APIVersion: addonv1alpha1.GroupVersion.String(),
			Kind:       "AddOnDeploymentConfig",
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:      in.Name,
			Namespace: in.Namespace,
			Labels:    hubLabels(),
		},
		Spec: addonv1alpha1.AddOnDeploymentConfigSpec{
			CustomizedVariables:   vars,
			AgentInstallNamespace: installNS,
		},
	}, nil
}

// validateServerAddress accepts a DNS name or an IP address: the agent joins
// it with the port itself, so a scheme, a port or a path would break dialing.
func validateServerAddress(addr string) error {
	if addr == "" {
		return fmt.Errorf("principal server address is empty")
	}
	if net.ParseIP(addr) != nil {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(addr)); len(errs) > 0 {
		return fmt.Errorf("principal server address %q is neither an IP address nor a DNS name: %s", addr, strings.Join(errs, "; "))
	}
	return nil
}

func validateImage(what, image string) error {
	if image == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if strings.ContainsAny(image, " \t\r\n\"\\{}") {
		return fmt.Errorf("%s %q contains whitespace, quotes, backslashes or braces", what, image)
	}
	return nil
}

// agentLogLevels are the levels argocd-agent (v0.9.0, v0.10.0) accepts (logrus names,
// matched case-insensitively); note "warning", not "warn".
var agentLogLevels = map[string]bool{
	"trace": true, "debug": true, "info": true, "warning": true, "error": true, "fatal": true,
}

// agentLogSubsystems may carry their own level as "<subsystem>=<level>".
var agentLogSubsystems = map[string]bool{
	"resource-proxy": true, "redis-proxy": true, "grpc-event": true,
}

// validateLogLevel checks a --log-level value up front, because the agent
// exits on an unknown level and would crash-loop on every cluster.
func validateLogLevel(v string) error {
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		sub, level, scoped := strings.Cut(part, "=")
		if !scoped {
			level = sub
		} else if !agentLogSubsystems[strings.TrimSpace(sub)] {
			return fmt.Errorf("log level %q names an unknown subsystem %q (known: grpc-event, redis-proxy, resource-proxy)", v, sub)
		}
		if !agentLogLevels[strings.ToLower(strings.TrimSpace(level))] {
			return fmt.Errorf("log level %q is invalid: use one of trace, debug, info, warning, error, fatal, optionally as <subsystem>=<level>", v)
		}
	}
	return nil
}

func hubLabels() map[string]string {
	return map[string]string{
		LabelManagedBy: v1alpha1.ManagedByValue,
		LabelPartOf:    PartOfValue,
	}
}
