package principalpki_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

const (
	ns        = "argocd"
	elderName = "platform/fleet"
)

var issuer = cmmeta.IssuerReference{Name: "ca-issuer", Kind: cmapi.IssuerKind, Group: certmanager.DefaultIssuerGroup}

// hub is a fake API server that records every write it is asked for, in order.
type hub struct {
	client.WithWatch
	writes []principalpki.Change
}

func newHub(t *testing.T) *hub {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, cmapi.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	h := &hub{}
	record := func(verb string, obj client.Object) {
		kind := "?"
		if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil {
			kind = gvk.Kind
		}
		h.writes = append(h.writes, principalpki.Change{Verb: verb, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
	h.WithWatch = fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			record("patch", obj)
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			record("delete-all-of", obj)
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			h.writes = append(h.writes, principalpki.Change{Verb: "apply"})
			return c.Apply(ctx, obj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			record("create "+sub, obj)
			return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record("update "+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			record("patch "+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}).Build()
	return h
}

// keepers returns the elder's keeper of h and a non-elder's, sharing one JWT key maker that
// counts the keys it makes.
func keepers(t *testing.T, h *hub, now time.Time) (elderKeeper, observer *principalpki.Keeper, keysMade *int) {
	t.Helper()
	key, err := pki.NewJWTSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	cfg := config.Default()
	cfg.Now = func() time.Time { return now }
	elderKeeper = &principalpki.Keeper{
		Hub:     config.Hub{Client: h, Reader: h, Config: cfg},
		JWTKeys: &pki.SpareKey{New: func() ([]byte, error) { made++; return key, nil }},
	}
	return elderKeeper, elderKeeper.Observer(ns, elderName), &made
}

func selfManaged() principalpki.Setting { return principalpki.Setting{Namespace: "platform"} }

func certManaged() principalpki.Setting {
	ref := issuer
	return principalpki.Setting{Issuer: &ref, Namespace: "platform"}
}

// TestObserverWritesNothingAndReportsTheElderPendingWrite: the keeper of a GitOpsCluster that
// is not its principal's elder makes no write, of any verb, and stops with PrincipalPKIPending
// naming the elder and the write the elder has yet to make; that write is the one the elder
// then makes first. Nor does it make a JWT signing key it would not write.
func TestObserverWritesNothingAndReportsTheElderPendingWrite(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	secret := func(name string) principalpki.Change {
		return principalpki.Change{Kind: "Secret", Namespace: ns, Name: name}
	}
	certificate := func(name string) principalpki.Change {
		return principalpki.Change{Kind: "Certificate", Namespace: ns, Name: name}
	}
	with := func(c principalpki.Change, verb string) principalpki.Change { c.Verb = verb; return c }
	// kept writes the elder's self-managed PKI, then edits it with edit.
	kept := func(edit func(t *testing.T, h *hub)) func(t *testing.T, h *hub, elder *principalpki.Keeper) {
		return func(t *testing.T, h *hub, elder *principalpki.Keeper) {
			t.Helper()
			if _, err := elder.Ensure(ctx, ns, []string{"principal.example.com"}, selfManaged()); err != nil {
				t.Fatal(err)
			}
			if edit != nil {
				edit(t, h)
			}
		}
	}
	editSecret := func(name string, edit func(*corev1.Secret)) func(t *testing.T, h *hub) {
		return func(t *testing.T, h *hub) {
			s := &corev1.Secret{}
			if err := h.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				t.Fatal(err)
			}
			edit(s)
			if err := h.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, h *hub, elder *principalpki.Keeper)
		setting principalpki.Setting
		want    principalpki.Change
	}{
		{"nothing yet: the CA is created", nil, selfManaged(), with(secret(names.CASecretName), "create")},
		{"no JWT signing key: it is created", kept(func(t *testing.T, h *hub) {
			if err := h.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.JWTSecretName}}); err != nil {
				t.Fatal(err)
			}
		}), selfManaged(), with(secret(names.JWTSecretName), "create")},
		{"a JWT key rotation asked: the key is updated", kept(editSecret(names.JWTSecretName, func(s *corev1.Secret) {
			s.Annotations = map[string]string{v1alpha1.AnnotationRotateJWTKeyNow: "now"}
		})), selfManaged(), with(secret(names.JWTSecretName), "update")},
		{"a JWT secret of another type: it is replaced", kept(func(t *testing.T, h *hub) {
			if err := h.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.JWTSecretName}}); err != nil {
				t.Fatal(err)
			}
			if err := h.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.JWTSecretName, Labels: names.ManagedLabels()},
				Type: corev1.SecretTypeTLS}); err != nil {
				t.Fatal(err)
			}
		}), selfManaged(), with(secret(names.JWTSecretName), "replace")},
		{"an emergency CA rotation asked: the CA is updated", kept(editSecret(names.CASecretName, func(s *corev1.Secret) {
			s.Annotations[v1alpha1.AnnotationRotateCANow] = "incident-1"
		})), selfManaged(), with(secret(names.CASecretName), "update")},
		{"to cert-manager: the resource proxy's own certificate is marked", kept(nil), certManaged(), with(secret(names.ResourceProxySecretName), "patch")},
		{"to cert-manager, from nothing: its CA Certificate is created", nil, certManaged(), with(certificate(certmanager.CACertificateName), "create")},
		{"back from cert-manager: its Certificates are deleted", func(t *testing.T, h *hub, _ *principalpki.Keeper) {
			for _, o := range []client.Object{
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CASecretName, Labels: names.ManagedLabels(),
					Annotations: map[string]string{certmanager.AnnotationPKISource: certmanager.PKISourceCertManager}}, Type: corev1.SecretTypeTLS},
				certmanager.CACertificate(ns, issuer, names.ManagedLabels()),
			} {
				if err := h.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}, selfManaged(), with(certificate(certmanager.CACertificateName), "delete")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub(t)
			elderKeeper, observer, keysMade := keepers(t, h, now)
			if tc.setup != nil {
				tc.setup(t, h, elderKeeper)
			}
			h.writes, *keysMade = nil, 0

			_, err := observer.Ensure(ctx, ns, []string{"principal.example.com"}, tc.setting)
			p, ok := principalpki.AsProblem(err)
			if !ok || p.Reason != v1alpha1.ReasonPrincipalPKIPending {
				t.Fatalf("the observer's Ensure: %v, want PrincipalPKIPending", err)
			}
			if p.Pending == nil || *p.Pending != tc.want {
				t.Errorf("pending %v, want %v", p.Pending, tc.want)
			}
			if !strings.Contains(p.Message, elderName) || !strings.Contains(p.Message, tc.want.String()) {
				t.Errorf("message %q does not name the elder %s and %s", p.Message, elderName, tc.want)
			}
			if len(h.writes) != 0 || *keysMade != 0 {
				t.Fatalf("the observer wrote %v and made %d JWT key(s), want nothing", h.writes, *keysMade)
			}

			// The elder makes that very write first (a replacement starts with its delete).
			_, _ = elderKeeper.Ensure(ctx, ns, []string{"principal.example.com"}, tc.setting)
			first := tc.want
			if first.Verb == "replace" {
				first.Verb = "delete"
			}
			if len(h.writes) == 0 || h.writes[0] != first {
				t.Errorf("the elder wrote %v, want %v first", h.writes, first)
			}
		})
	}
}

// TestObserverUsesWhatTheElderKeeps: once the elder has written the PKI, a non-elder finds
// nothing pending, writes nothing, and uses the elder's CA.
func TestObserverUsesWhatTheElderKeeps(t *testing.T) {
	ctx := context.Background()
	h := newHub(t)
	elderKeeper, observer, keysMade := keepers(t, h, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	kept, err := elderKeeper.Ensure(ctx, ns, []string{"principal.example.com"}, selfManaged())
	if err != nil {
		t.Fatal(err)
	}
	if len(kept.Issued) != 4 || len(h.writes) != 4 {
		t.Fatalf("the elder issued %v in writes %v, want the CA, two serving certificates and the JWT key", kept.Issued, h.writes)
	}
	h.writes, *keysMade = nil, 0
	seen, err := observer.Ensure(ctx, ns, []string{"principal.example.com"}, selfManaged())
	if err != nil {
		t.Fatalf("the observer's Ensure with everything in place: %v", err)
	}
	if len(h.writes) != 0 || *keysMade != 0 || len(seen.Issued) != 0 {
		t.Errorf("the observer wrote %v, issued %v and made %d JWT key(s), want nothing", h.writes, seen.Issued, *keysMade)
	}
	if pki.Fingerprint(seen.CA.Cert) != pki.Fingerprint(kept.CA.Cert) || seen.PrincipalCertHash != kept.PrincipalCertHash {
		t.Errorf("the observer uses another CA or serving certificate than the elder's")
	}
}
