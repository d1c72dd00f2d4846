// Package seal marks the ManifestWorks the pull model writes so that it can later tell them
// from ManifestWorks it did not write. A managed cluster's work agent may update the labels and
// annotations of every ManifestWork in its cluster namespace; a ManifestWork is the manager's
// only when it carries a seal over its own name and namespace and the hub Application (or, for
// one carrying an AppProject, the hub AppProject) it names, made with a key the work agent never
// sees. Deleting a ManifestWork and reporting on it depend on its seal, never on its labels
// alone; status is read only from the ManifestWork at the place an Application's own name and
// UID give.
package seal

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// Annotation holds a ManifestWork's seal.
const Annotation = "apps.open-cluster-management.io/pull-model-seal"

// keyField is the Secret data key of the sealing key.
const keyField = "key"

// keyBytes is the length of a sealing key (HMAC-SHA256).
const keyBytes = 32

// Fields are what a seal covers: the ManifestWork's own place and the hub Application and
// ApplicationSet it says it was made from, or, for a ManifestWork carrying an AppProject, that
// hub AppProject's name.
type Fields struct {
	Namespace, Name       string
	AppNamespace, AppName string
	ApplicationSet        string
	Project               string
}

// Sealer makes and checks seals with one key.
type Sealer struct{ key []byte }

// New returns a Sealer for key, which must be at least 32 bytes.
func New(key []byte) (*Sealer, error) {
	if len(key) < keyBytes {
		return nil, fmt.Errorf("a sealing key needs at least %d bytes, got %d", keyBytes, len(key))
	}
	return &Sealer{key: append([]byte(nil), key...)}, nil
}

// Sign returns the seal of f.
func (s *Sealer) Sign(f Fields) string {
	m := hmac.New(sha256.New, s.key)
	// NUL cannot occur in a name or an annotation key, so the fields cannot run into each other.
	// A project's seal has a tag of its own: it never verifies as an Application's, and the
	// seals made before projects had ManifestWorks of their own stay valid.
	parts := []string{"v1", f.Namespace, f.Name, f.AppNamespace, f.AppName, f.ApplicationSet}
	if f.Project != "" {
		parts = []string{"appproject-v1", f.Namespace, f.Name, f.Project}
	}
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether seal is the seal of f.
func (s *Sealer) Verify(f Fields, seal string) bool {
	got, err := base64.RawURLEncoding.DecodeString(seal)
	if err != nil {
		return false
	}
	want, _ := base64.RawURLEncoding.DecodeString(s.Sign(f))
	return hmac.Equal(got, want)
}

// LoadOrCreateKey returns the sealing key kept in the Secret at ref, creating the Secret with a
// new random key when there is none. Two managers starting at once agree: the one whose create
// loses reads the winner's key.
func LoadOrCreateKey(ctx context.Context, reader client.Reader, writer client.Writer, ref types.NamespacedName) ([]byte, error) {
	for attempt := 0; attempt < 2; attempt++ {
		s := &corev1.Secret{}
		err := reader.Get(ctx, ref, s)
		if err == nil {
			key := s.Data[keyField]
			if len(key) < keyBytes {
				return nil, fmt.Errorf("secret %s holds no usable sealing key (data %q of at least %d bytes); delete it and the manager makes a new one (ManifestWorks sealed with the old key are then no longer recognised as the manager's)", ref, keyField, keyBytes)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the sealing key %s: %w", ref, err)
		}
		key := make([]byte, keyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, Labels: map[string]string{
				v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
			}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{keyField: key},
		}
		switch err := writer.Create(ctx, s); {
		case err == nil:
			return key, nil
		case apierrors.IsAlreadyExists(err):
			continue
		default:
			return nil, fmt.Errorf("creating the sealing key %s: %w", ref, err)
		}
	}
	return nil, errors.New("the sealing key was created and removed while it was read; try again")
}

// serviceAccountNamespaceFile is where a pod finds its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace is the namespace the manager runs in when it runs in a pod, else "default".
func OwnNamespace() string {
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	return "default"
}
