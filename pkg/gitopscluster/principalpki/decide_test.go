package principalpki_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/principalpki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

func TestDecide(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	goc := func(ns, name string, age int, address string, issuer string) *v1alpha1.GitOpsCluster {
		g := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(-age) * time.Hour))}}
		g.Spec.ArgoCDAgentAddon.PrincipalServerAddress = address
		if issuer != "" {
			g.Spec.ArgoCDAgentAddon.CertManager = &v1alpha1.CertManagerPKI{IssuerRef: v1alpha1.CertManagerIssuerReference{Name: issuer}}
		}
		return g
	}
	older := goc("a", "older", 2, "a.example.com", "")
	younger := goc("b", "younger", 1, "b.example.com", "")
	youngerCM := goc("b", "younger", 1, "b.example.com", "ca-issuer")
	// Same creation time: namespace, then name, decides.
	twin := goc("c", "twin", 2, "", "")
	for _, tc := range []struct {
		name       string
		goc        *v1alpha1.GitOpsCluster
		members    ownership.Members
		discovered string
		elder      types.NamespacedName
		isElder    bool
		conflict   bool
		hosts      []string
	}{
		{"alone", older, ownership.Members{older}, "a.example.com", types.NamespacedName{Namespace: "a", Name: "older"}, true, false, []string{"a.example.com"}},
		{"alone, nothing discovered", older, nil, "", types.NamespacedName{Namespace: "a", Name: "older"}, true, false, nil},
		{"the elder keeps it, the others' addresses named", older, ownership.Members{older, younger}, "a.example.com", types.NamespacedName{Namespace: "a", Name: "older"}, true, false, []string{"a.example.com", "b.example.com"}},
		{"a younger member reads it", younger, ownership.Members{older, younger}, "b.example.com", types.NamespacedName{Namespace: "a", Name: "older"}, false, false, []string{"b.example.com", "a.example.com"}},
		{"a younger member asking for cert-manager is told", youngerCM, ownership.Members{older, youngerCM}, "", types.NamespacedName{Namespace: "a", Name: "older"}, false, true, []string{"a.example.com"}},
		{"equal age: namespace order", twin, ownership.Members{older, twin}, "", types.NamespacedName{Namespace: "a", Name: "older"}, false, false, []string{"a.example.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := principalpki.Decide(tc.goc, tc.members, "principal", tc.discovered)
			if d.Elder != tc.elder || d.IsElder != tc.isElder || (d.Conflict != nil) != tc.conflict || !reflect.DeepEqual(d.Hosts, tc.hosts) {
				t.Fatalf("Decide = %+v; want elder %s (is elder %v), conflict %v, hosts %v", d, tc.elder, tc.isElder, tc.conflict, tc.hosts)
			}
			if d.Setting.Namespace != tc.elder.Namespace {
				t.Errorf("the setting is %s's, want the elder's", d.Setting.Namespace)
			}
			if tc.conflict && (d.Conflict.Reason != v1alpha1.ReasonPKIConflict || !strings.Contains(d.Conflict.Message, "a/older")) {
				t.Errorf("conflict %+v does not name the elder", d.Conflict)
			}
		})
	}
}
