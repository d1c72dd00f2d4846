package addon

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// testCAPEM returns a freshly generated self-signed CA certificate in PEM.
func testCAPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func validTemplateInput(t *testing.T) TemplateInput {
	return TemplateInput{
		AddonName:          DefaultAddonName,
		TemplateName:       "argocd-agent-addon-my-gitops-cluster",
		SignerName:         DefaultSignerName,
		SigningCANamespace: "open-cluster-management-hub",
		CABundlePEM:        testCAPEM(t, "argocd-agent-ca"),
		Mode:               ModeManaged,
	}
}

func validADCInput() DeploymentConfigInput {
	return DeploymentConfigInput{
		Name:                  "my-gitops-cluster",
		Namespace:             "open-cluster-management",
		AgentInstallNamespace: "argocd",
		ServerAddress:         "principal.hub.example.com",
		ServerPort:            8443,
		Mode:                  ModeManaged,
		AgentImage:            "quay.io/argoprojlabs/argocd-agent:v0.9.0",
		ReloaderImage:         "ghcr.io/argocd-agent-addon/argocd-agent-addon:v0.1.0",
		LogLevel:              "debug",
	}
}

func mustTemplate(t *testing.T, in TemplateInput) *addonv1alpha1.AddOnTemplate {
	t.Helper()
	tpl, err := BuildAddOnTemplate(in)
	if err != nil {
		t.Fatalf("BuildAddOnTemplate: %v", err)
	}
	return tpl
}

func mustADC(t *testing.T, in DeploymentConfigInput) *addonv1alpha1.AddOnDeploymentConfig {
	t.Helper()
	adc, err := BuildDeploymentConfig(in)
	if err != nil {
		t.Fatalf("BuildDeploymentConfig: %v", err)
	}
	return adc
}

var tagPattern = regexp.MustCompile(`\{\{([^{}]*)\}\}`)

// renderLikeOCM mimics OCM's template addon rendering: every "{{NAME}}" in the
// raw JSON is replaced by its value verbatim (no JSON escaping) and unknown
// tags become empty strings. It reports the unknown tags it met.
func renderLikeOCM(t *testing.T, raw []byte, values map[string]string) (string, []string) {
	t.Helper()
	s := string(raw)
	if n := strings.Count(s, "{{"); n != len(tagPattern.FindAllString(s, -1)) {
		t.Fatalf("manifest has %d \"{{\" but only %d well-formed tags: %s", n, len(tagPattern.FindAllString(s, -1)), s)
	}
	var unknown []string
	out := tagPattern.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-2]
		v, ok := values[name]
		if !ok {
			unknown = append(unknown, name)
		}
		return v
	})
	return out, unknown
}

// ocmValues is the value set OCM would use for one cluster: the ADC's
// customized variables plus the built-ins, which win over them.
func ocmValues(adc *addonv1alpha1.AddOnDeploymentConfig, cluster string) map[string]string {
	vals := map[string]string{}
	for _, v := range adc.Spec.CustomizedVariables {
		vals[v.Name] = v.Value
	}
	vals[VarHubKubeconfig] = "/managed/hub-kubeconfig/kubeconfig"
	vals[VarClusterName] = cluster
	if adc.Spec.AgentInstallNamespace != "" {
		vals[VarInstallNamespace] = adc.Spec.AgentInstallNamespace
	}
	return vals
}

// decodeStrict decodes JSON into a typed object and fails on unknown fields,
// so a misspelt field in a builder shows up as a test failure.
func decodeStrict(t *testing.T, data string, into interface{}) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("decode into %T: %v\n%s", into, err, data)
	}
}

// manifestKinds returns the kind of every raw manifest, in order.
func manifestKind(t *testing.T, raw []byte) string {
	t.Helper()
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		t.Fatalf("manifest is not JSON: %v\n%s", err, raw)
	}
	return tm.Kind
}

// rawByKind returns the single raw manifest of a kind.
func rawByKind(t *testing.T, tpl *addonv1alpha1.AddOnTemplate, kind string) []byte {
	t.Helper()
	var found []byte
	for _, m := range tpl.Spec.AgentSpec.Workload.Manifests {
		if manifestKind(t, m.Raw) == kind {
			if found != nil {
				t.Fatalf("more than one %s in the template", kind)
			}
			found = m.Raw
		}
	}
	if found == nil {
		t.Fatalf("no %s in the template", kind)
	}
	return found
}
