package addon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// ConfigSpecHash is the hash OCM's addon manager records for a config in a
// ManagedClusterAddOn's status.configReferences (desiredConfig and lastAppliedConfig
// specHash): SHA-256, in hex, of the JSON of every top-level field of the object but
// apiVersion, kind, metadata and status. obj must be the object as stored (with the API
// server's defaults), for example read back from the cache.
func ConfigSpecHash(obj runtime.Object) (string, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", err
	}
	for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
		delete(u, k)
	}
	raw, err := json.Marshal(u)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// TemplateCABundle returns the trust bundle an agent AddOnTemplate delivers (ca.crt of the
// spoke's SpokeCASecretName Secret), or nil when it carries none.
func TemplateCABundle(t *addonv1alpha1.AddOnTemplate) []byte {
	for _, m := range t.Spec.AgentSpec.Workload.Manifests {
		var s corev1.Secret
		if json.Unmarshal(m.Raw, &s) != nil || s.Kind != "Secret" || s.Name != SpokeCASecretName {
			continue
		}
		return s.Data[SpokeCASecretKey]
	}
	return nil
}
