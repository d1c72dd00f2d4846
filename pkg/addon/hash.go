package addon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// TemplateHash is the hex SHA-256 of the JSON of the template's spec. The
// spec's manifests are already canonical bytes, so equal specs hash equal;
// callers use it to detect changes and to name templates by content.
func TemplateHash(t *addonv1alpha1.AddOnTemplate) string {
	if t == nil {
		return ""
	}
	b, err := json.Marshal(t.Spec)
	if err != nil {
		// Spec holds only strings, slices and valid raw JSON built here;
		// hash the error text so a broken spec never equals a good one.
		b = []byte("unmarshalable: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
