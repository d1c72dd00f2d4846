package addon

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

func TestBuildDeploymentConfig(t *testing.T) {
	in := validADCInput()
	adc := mustADC(t, in)
	if adc.Name != in.Name || adc.Namespace != in.Namespace {
		t.Errorf("ADC %s/%s, want %s/%s", adc.Namespace, adc.Name, in.Namespace, in.Name)
	}
	if adc.Kind != "AddOnDeploymentConfig" || adc.APIVersion != "addon.open-cluster-management.io/v1alpha1" {
		t.Errorf("type meta %+v", adc.TypeMeta)
	}
	if adc.Spec.AgentInstallNamespace != "argocd" {
		t.Errorf("agentInstallNamespace %q", adc.Spec.AgentInstallNamespace)
	}
	want := map[string]string{
		VarServerAddress: "principal.hub.example.com",
		VarServerPort:    "8443",
		VarMode:          "managed",
		VarAgentImage:    "quay.io/argoprojlabs/argocd-agent:v0.9.0",
		VarReloaderImage: "ghcr.io/argocd-agent-addon/argocd-agent-addon:v0.1.0",
		VarLogLevel:      "debug",
		// Managed mode: the agent leaves the Applications it did not create alone.
		VarIgnoreUnmanagedApps: "true",
	}
	got := map[string]string{}
	var names []string
	for _, v := range adc.Spec.CustomizedVariables {
		if _, dup := got[v.Name]; dup {
			t.Errorf("variable %s emitted twice", v.Name)
		}
		got[v.Name] = v.Value
		names = append(names, v.Name)
		if err := ValidateVariable(v.Name, v.Value); err != nil {
			t.Errorf("emitted variable fails validation: %v", err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("variables %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("variable %s = %q, want %q", k, got[k], v)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("variables not sorted by name: %v", names)
	}
	// Exact names are part of the contract with templates already on hubs.
	wantNames := []string{"ARGOCD_AGENT_IGNORE_UNMANAGED_APPS", "ARGOCD_AGENT_IMAGE", "ARGOCD_AGENT_LOG_LEVEL", "ARGOCD_AGENT_MODE",
		"ARGOCD_AGENT_SERVER_ADDRESS", "ARGOCD_AGENT_SERVER_PORT", "CERT_RELOADER_IMAGE"}
	if strings.Join(names, ",") != strings.Join(wantNames, ",") {
		t.Errorf("variable names %v, want %v", names, wantNames)
	}

	a, _ := json.Marshal(adc)
	b, _ := json.Marshal(mustADC(t, in))
	if string(a) != string(b) {
		t.Errorf("ADC is not deterministic")
	}
}

func TestBuildDeploymentConfigDefaults(t *testing.T) {
	in := validADCInput()
	in.AgentInstallNamespace = ""
	in.LogLevel = ""
	adc := mustADC(t, in)
	if adc.Spec.AgentInstallNamespace != DefaultAgentInstallNamespace {
		t.Errorf("agentInstallNamespace %q, want default %q", adc.Spec.AgentInstallNamespace, DefaultAgentInstallNamespace)
	}
	for _, v := range adc.Spec.CustomizedVariables {
		if v.Name == VarLogLevel && v.Value != "info" {
			t.Errorf("default log level %q, want info", v.Value)
		}
	}
}

func TestBuildDeploymentConfigAcceptsValidVariants(t *testing.T) {
	variants := map[string]func(*DeploymentConfigInput){
		"ipv4 address":     func(in *DeploymentConfigInput) { in.ServerAddress = "192.168.1.10" },
		"autonomous":       func(in *DeploymentConfigInput) { in.Mode = ModeAutonomous },
		"subsystem levels": func(in *DeploymentConfigInput) { in.LogLevel = "info,resource-proxy=debug,grpc-event=WARNING" },
		"digest image": func(in *DeploymentConfigInput) {
			in.AgentImage = "quay.io/argoprojlabs/argocd-agent@sha256:" + strings.Repeat("a", 64)
		},
		"1024 chars image": func(in *DeploymentConfigInput) { in.AgentImage = "r/" + strings.Repeat("a", 1022) },
		"port 65535":       func(in *DeploymentConfigInput) { in.ServerPort = 65535 },
	}
	for name, mutate := range variants {
		t.Run(name, func(t *testing.T) {
			in := validADCInput()
			mutate(&in)
			if _, err := BuildDeploymentConfig(in); err != nil {
				t.Fatalf("rejected valid input: %v", err)
			}
		})
	}
}

func TestBuildDeploymentConfigRejectsBadValues(t *testing.T) {
	cases := map[string]func(*DeploymentConfigInput){
		"quote in address":      func(in *DeploymentConfigInput) { in.ServerAddress = `evil","x":"` },
		"newline in address":    func(in *DeploymentConfigInput) { in.ServerAddress = "a.example.com\n" },
		"scheme in address":     func(in *DeploymentConfigInput) { in.ServerAddress = "https://a.example.com" },
		"port in address":       func(in *DeploymentConfigInput) { in.ServerAddress = "a.example.com:443" },
		"empty address":         func(in *DeploymentConfigInput) { in.ServerAddress = "" },
		"quote in image":        func(in *DeploymentConfigInput) { in.AgentImage = `quay.io/a"b` },
		"newline in image":      func(in *DeploymentConfigInput) { in.ReloaderImage = "ghcr.io/x\n:v1" },
		"backslash in image":    func(in *DeploymentConfigInput) { in.AgentImage = `quay.io\a` },
		"tag in image":          func(in *DeploymentConfigInput) { in.AgentImage = "quay.io/{{CLUSTER_NAME}}" },
		"too long image":        func(in *DeploymentConfigInput) { in.AgentImage = "r/" + strings.Repeat("a", 1023) },
		"empty reloader":        func(in *DeploymentConfigInput) { in.ReloaderImage = "" },
		"port zero":             func(in *DeploymentConfigInput) { in.ServerPort = 0 },
		"port too high":         func(in *DeploymentConfigInput) { in.ServerPort = 70000 },
		"bad mode":              func(in *DeploymentConfigInput) { in.Mode = "Managed" },
		"bad log level":         func(in *DeploymentConfigInput) { in.LogLevel = "warn" },
		"bad log subsystem":     func(in *DeploymentConfigInput) { in.LogLevel = "kube=debug" },
		"quote in log level":    func(in *DeploymentConfigInput) { in.LogLevel = `info"` },
		"bad install namespace": func(in *DeploymentConfigInput) { in.AgentInstallNamespace = "Argo_CD" },
		"empty name":            func(in *DeploymentConfigInput) { in.Name = "" },
		"empty namespace":       func(in *DeploymentConfigInput) { in.Namespace = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := validADCInput()
			mutate(&in)
			if adc, err := BuildDeploymentConfig(in); err == nil {
				t.Fatalf("accepted bad input: %+v", adc.Spec.CustomizedVariables)
			}
		})
	}
}

func TestValidateVariable(t *testing.T) {
	ok := map[string]string{
		"A":         "plain",
		"_x9":       "",
		"MAX":       strings.Repeat("v", MaxVariableValueLength),
		"BRACES":    "a}}b{c",
		"UNICODE":   "café",
		"PUNCT":     "host.example.com:443/path?x=1&y=<2>",
		"lowercase": "v",
	}
	for name, value := range ok {
		if err := ValidateVariable(name, value); err != nil {
			t.Errorf("ValidateVariable(%q) rejected a safe value: %v", name, err)
		}
	}
	bad := []struct{ name, value string }{
		{"QUOTE", `a"b`},
		{"BACKSLASH", `a\b`},
		{"NEWLINE", "a\nb"},
		{"CR", "a\rb"},
		{"TAB", "a\tb"},
		{"NUL", "a\x00b"},
		{"TAG", "a{{b"},
		{"LONG", strings.Repeat("v", MaxVariableValueLength+1)},
		{"BADUTF8", "a\xffb"},
		{"9STARTS_WITH_DIGIT", "v"},
		{"HAS-DASH", "v"},
		{"HAS SPACE", "v"},
		{"", "v"},
		{"CLUSTER_NAME", "v"},
		{"INSTALL_NAMESPACE", "v"},
		{"HUB_KUBECONFIG", "v"},
	}
	for _, c := range bad {
		if err := ValidateVariable(c.name, c.value); err == nil {
			t.Errorf("ValidateVariable(%q, %q) accepted an unsafe variable", c.name, c.value)
		}
	}
}

// A value that passes validation must keep the manifest valid JSON after
// OCM's unescaped substitution; this is the property the rules protect.
// (A backslash can also silently change a value, e.g. `\b` becomes a
// backspace, which is why it is rejected even where JSON stays valid.)
func TestValidatedValuesKeepJSONValid(t *testing.T) {
	raw := []byte(`{"a":"--flag={{V}}","b":["{{V}}"]}`)
	for _, v := range []string{"plain", "a}}b", "<&>", "café", strings.Repeat("x", MaxVariableValueLength), `a"b`, "a\nb", `a\q`} {
		out, _ := renderLikeOCM(t, raw, map[string]string{"V": v})
		valid := json.Valid([]byte(out))
		if err := ValidateVariable("V", v); (err == nil) != valid {
			t.Errorf("value %q: validation error %v but rendered JSON valid=%v", v, err, valid)
		}
	}
}

// The agent image is read back from the config the components' release is picked from.
func TestVariableReadsTheConfig(t *testing.T) {
	adc := mustADC(t, validADCInput())
	if got := Variable(adc, VarAgentImage); got != validADCInput().AgentImage {
		t.Errorf("agent image %q, want %q", got, validADCInput().AgentImage)
	}
	if got := Variable(adc, "NO_SUCH_VARIABLE"); got != "" {
		t.Errorf("an absent variable reads %q", got)
	}
	if got := Variable(nil, VarAgentImage); got != "" {
		t.Errorf("no config reads %q", got)
	}
}
