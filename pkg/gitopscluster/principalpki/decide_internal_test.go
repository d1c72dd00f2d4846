package principalpki

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/certmanager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

func TestDecideCA(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("argocd-agent-ca", 30*24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caSecret := func(ours bool, annotations map[string]string, data map[string][]byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.CASecretName, Annotations: annotations}, Type: corev1.SecretTypeTLS, Data: data}
		if ours {
			s.Labels = names.ManagedLabels()
		}
		return s
	}
	valid := map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM}
	rotatedAt := now.Add(-time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name                   string
		existing               *corev1.Secret
		at                     time.Time
		step                   caStep
		invalid                bool
		leaving, emergency     bool
		distrusted, hasCurrent bool
	}{
		{"none: made", nil, now, caMade, false, false, false, false, false},
		{"ours and current: kept", caSecret(true, nil, valid), now, caKept, false, false, false, false, true},
		{"ours, two thirds of its life gone: made", caSecret(true, nil, valid), now.Add(21 * 24 * time.Hour), caMade, false, false, false, false, false},
		{"ours, unreadable: made", caSecret(true, nil, map[string][]byte{corev1.TLSCertKey: []byte("x")}), now, caMade, false, false, false, false, false},
		{"the user's: adopted", caSecret(false, nil, valid), now, caAdopted, false, false, false, false, true},
		{"the user's, near its end: adopted all the same", caSecret(false, nil, valid), now.Add(21 * 24 * time.Hour), caAdopted, false, false, false, false, true},
		{"the user's, unreadable: adopted, and refused", caSecret(false, nil, nil), now, caAdopted, true, false, false, false, false},
		{"an emergency rotation asked: made, every previous CA distrusted",
			caSecret(true, map[string]string{v1alpha1.AnnotationRotateCANow: "incident-1"}, valid), now, caMade, false, false, true, true, false},
		{"that rotation done: kept, still distrusting",
			caSecret(true, map[string]string{v1alpha1.AnnotationRotateCANow: "incident-1", v1alpha1.AnnotationCARotatedFor: "incident-1",
				v1alpha1.AnnotationCADistrustedAt: rotatedAt, v1alpha1.AnnotationCARotatedAt: rotatedAt}, valid), now, caKept, false, false, false, true, true},
		{"renewed since that rotation: kept, trusting again",
			caSecret(true, map[string]string{v1alpha1.AnnotationRotateCANow: "incident-1", v1alpha1.AnnotationCARotatedFor: "incident-1",
				v1alpha1.AnnotationCADistrustedAt: rotatedAt, v1alpha1.AnnotationCARotatedAt: now.Format(time.RFC3339)}, valid), now, caKept, false, false, false, false, true},
		{"cert-manager's: made, leaving cert-manager",
			caSecret(true, map[string]string{certmanager.AnnotationPKISource: certmanager.PKISourceCertManager}, valid), now, caMade, false, true, false, false, false},
		{"the user's, naming cert-manager: adopted",
			caSecret(false, map[string]string{certmanager.AnnotationPKISource: certmanager.PKISourceCertManager}, valid), now, caAdopted, false, false, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideCA(tc.existing, tc.at)
			if d.step != tc.step || (d.invalid != nil) != tc.invalid || d.leaving != tc.leaving || d.emergency != tc.emergency ||
				d.distrusted != tc.distrusted || (d.current != nil) != tc.hasCurrent {
				t.Errorf("decideCA = %+v", d)
			}
		})
	}
}

func TestJWTKeyDue(t *testing.T) {
	key, err := pki.NewJWTSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	jwt := func(ours bool, annotations map[string]string, k []byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: names.JWTSecretName, Annotations: annotations}, Data: map[string][]byte{names.JWTSecretKey: k}}
		if ours {
			s.Labels = names.ManagedLabels()
		}
		return s
	}
	for _, tc := range []struct {
		name              string
		existing          *corev1.Secret
		due               bool
		token, rotatedFor string
	}{
		{"none: written", nil, true, "", ""},
		{"ours and valid: kept", jwt(true, nil, key), false, "", ""},
		{"ours and invalid: written", jwt(true, nil, []byte("x")), true, "", ""},
		{"the user's, invalid: theirs", jwt(false, nil, []byte("x")), false, "", ""},
		{"the user's, a rotation asked: theirs", jwt(false, map[string]string{v1alpha1.AnnotationRotateJWTKeyNow: "t1"}, key), false, "", ""},
		{"a rotation asked: written for it", jwt(true, map[string]string{v1alpha1.AnnotationRotateJWTKeyNow: "t1"}, key), true, "t1", ""},
		{"that rotation done: kept", jwt(true, map[string]string{v1alpha1.AnnotationRotateJWTKeyNow: "t1", v1alpha1.AnnotationJWTKeyRotatedFor: "t1"}, key), false, "", "t1"},
		{"another rotation asked: written for it",
			jwt(true, map[string]string{v1alpha1.AnnotationRotateJWTKeyNow: "t2", v1alpha1.AnnotationJWTKeyRotatedFor: "t1"}, key), true, "t2", "t1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, token, rotatedFor := jwtKeyDue(tc.existing)
			if due != tc.due || token != tc.token || rotatedFor != tc.rotatedFor {
				t.Errorf("jwtKeyDue = %v, %q, %q; want %v, %q, %q", due, token, rotatedFor, tc.due, tc.token, tc.rotatedFor)
			}
		})
	}
}

func TestServingCertFits(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := pki.NewCA("argocd-agent-ca", 365*24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another-ca", 365*24*time.Hour, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"argocd-agent-principal", "principal.example.com"}
	served := func(by *pki.KeyPair, dnsNames []string, caCRT []byte) *corev1.Secret {
		kp, err := by.IssueServerCert("argocd-agent-principal", dnsNames, nil, 30*24*time.Hour, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: kp.CertPEM, corev1.TLSPrivateKeyKey: kp.KeyPEM, "ca.crt": caCRT}}
	}
	for _, tc := range []struct {
		name     string
		existing *corev1.Secret
		at       time.Time
		fits     bool
	}{
		{"current", served(ca, hosts, ca.CertPEM), now, true},
		{"another address named", served(ca, []string{"argocd-agent-principal", "old.example.com"}, ca.CertPEM), now, false},
		{"two thirds of its life gone", served(ca, hosts, ca.CertPEM), now.Add(20 * 24 * time.Hour), false},
		{"signed by another CA", served(other, hosts, ca.CertPEM), now, false},
		{"its ca.crt is not the CA alone", served(ca, hosts, append(append([]byte{}, ca.CertPEM...), other.CertPEM...)), now, false},
		{"unreadable", &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: []byte("x")}}, now, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, fits := servingCertFits(tc.existing, hosts, nil, ca, tc.at); fits != tc.fits {
				t.Errorf("servingCertFits = %v, want %v", fits, tc.fits)
			}
		})
	}
}
