package principal

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

var svcKey = types.NamespacedName{Namespace: "argocd", Name: "argocd-agent-principal"}

func svc(typ corev1.ServiceType, ports []corev1.ServicePort, ingress ...corev1.LoadBalancerIngress) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcKey.Namespace, Name: svcKey.Name}, Spec: corev1.ServiceSpec{Type: typ, Ports: ports}}
	s.Status.LoadBalancer.Ingress = ingress
	return s
}

func node(name string, ready bool, addrs ...corev1.NodeAddress) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}, Addresses: addrs}}
}

func TestDiscover(t *testing.T) {
	port443 := []corev1.ServicePort{{Name: "grpc", Port: 8443, NodePort: 30001}, {Name: "https", Port: 443, NodePort: 30443}}
	p := intstr.FromString("8443")
	cases := []struct {
		name    string
		spec    v1alpha1.ArgoCDAgentAddonSpec
		objects []client.Object
		want    *v1alpha1.PrincipalEndpoint
		reason  string
	}{
		{"spec address with the default port", v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "p.example.com"}, nil,
			&v1alpha1.PrincipalEndpoint{Address: "p.example.com", Port: 443, Source: v1alpha1.PrincipalSourceSpec}, v1alpha1.ReasonPrincipalFromSpec},
		{"spec address with a quoted port", v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerAddress: "10.0.0.1", PrincipalServerPort: &p}, nil,
			&v1alpha1.PrincipalEndpoint{Address: "10.0.0.1", Port: 8443, Source: v1alpha1.PrincipalSourceSpec}, v1alpha1.ReasonPrincipalFromSpec},
		{"no Service", v1alpha1.ArgoCDAgentAddonSpec{}, nil, nil, v1alpha1.ReasonPrincipalNotFound},
		{"load balancer host name before IP, port named https", v1alpha1.ArgoCDAgentAddonSpec{},
			[]client.Object{svc(corev1.ServiceTypeLoadBalancer, port443, corev1.LoadBalancerIngress{IP: "192.0.2.1"}, corev1.LoadBalancerIngress{Hostname: "lb.example.com"})},
			&v1alpha1.PrincipalEndpoint{Address: "lb.example.com", Port: 443, Source: v1alpha1.PrincipalSourceLoadBalancer}, v1alpha1.ReasonPrincipalFromService},
		{"spec port overrides a discovered one", v1alpha1.ArgoCDAgentAddonSpec{PrincipalServerPort: &p},
			[]client.Object{svc(corev1.ServiceTypeLoadBalancer, port443, corev1.LoadBalancerIngress{IP: "192.0.2.1"})},
			&v1alpha1.PrincipalEndpoint{Address: "192.0.2.1", Port: 8443, Source: v1alpha1.PrincipalSourceLoadBalancer}, v1alpha1.ReasonPrincipalFromService},
		{"node port: a Ready node's ExternalIP before any InternalIP", v1alpha1.ArgoCDAgentAddonSpec{},
			[]client.Object{svc(corev1.ServiceTypeNodePort, port443),
				node("a", true, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}),
				node("b", false, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.9"}),
				node("c", true, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.3"})},
			&v1alpha1.PrincipalEndpoint{Address: "198.51.100.3", Port: 30443, Source: v1alpha1.PrincipalSourceNodePort}, v1alpha1.ReasonPrincipalFromService},
		{"node port without a Ready node", v1alpha1.ArgoCDAgentAddonSpec{},
			[]client.Object{svc(corev1.ServiceTypeNodePort, port443), node("a", false, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})},
			nil, v1alpha1.ReasonPrincipalNoAddress},
		{"ClusterIP Service only", v1alpha1.ArgoCDAgentAddonSpec{},
			[]client.Object{svc(corev1.ServiceTypeClusterIP, []corev1.ServicePort{{Port: 8443}})}, nil, v1alpha1.ReasonPrincipalNoAddress},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(tc.objects...).WithStatusSubresource(&corev1.Service{}, &corev1.Node{}).Build()
			got, err := Discover(context.Background(), c, tc.spec, svcKey)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != tc.reason {
				t.Errorf("reason = %s, want %s (%s)", got.Reason, tc.reason, got.Message)
			}
			if got.Message == "" {
				t.Error("no message")
			}
			switch {
			case tc.want == nil && got.Endpoint != nil:
				t.Errorf("endpoint = %+v, want none", *got.Endpoint)
			case tc.want != nil && (got.Endpoint == nil || *got.Endpoint != *tc.want):
				t.Errorf("endpoint = %+v, want %+v", got.Endpoint, *tc.want)
			}
		})
	}
}

// TestDiscoverKeepsTheEndpointAgentsDial: a brief loss of the load balancer or the Service
// keeps the previous endpoint, and a NodePort endpoint keeps its node while that node is
// Ready, so nothing is re-issued or rolled out for a blip.
func TestDiscoverKeepsTheEndpointAgentsDial(t *testing.T) {
	port443 := []corev1.ServicePort{{Name: "https", Port: 443, NodePort: 30443}}
	lb := &v1alpha1.PrincipalEndpoint{Address: "lb.example.com", Port: 443, Source: v1alpha1.PrincipalSourceLoadBalancer}
	onNodeC := &v1alpha1.PrincipalEndpoint{Address: "198.51.100.3", Port: 30443, Source: v1alpha1.PrincipalSourceNodePort}
	fromSpec := &v1alpha1.PrincipalEndpoint{Address: "old.example.com", Port: 443, Source: v1alpha1.PrincipalSourceSpec}
	cases := []struct {
		name     string
		objects  []client.Object
		previous *v1alpha1.PrincipalEndpoint
		want     *v1alpha1.PrincipalEndpoint
		reason   string
	}{
		{"load balancer lost its address", []client.Object{svc(corev1.ServiceTypeLoadBalancer, port443)}, lb, lb, v1alpha1.ReasonPrincipalLastKnown},
		{"Service deleted for a moment", nil, lb, lb, v1alpha1.ReasonPrincipalLastKnown},
		{"a spec endpoint removed from the spec is not kept", nil, fromSpec, nil, v1alpha1.ReasonPrincipalNotFound},
		{"node port: the previous node stays while Ready, although another sorts first", []client.Object{svc(corev1.ServiceTypeNodePort, port443),
			node("a", true, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}),
			node("c", true, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.3"})},
			onNodeC, onNodeC, v1alpha1.ReasonPrincipalFromService},
		{"node port: the previous node gains an ExternalIP", []client.Object{svc(corev1.ServiceTypeNodePort, port443),
			node("a", true, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}),
			node("c", true, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.3"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.3"})},
			&v1alpha1.PrincipalEndpoint{Address: "10.0.0.3", Port: 30443, Source: v1alpha1.PrincipalSourceNodePort}, onNodeC, v1alpha1.ReasonPrincipalFromService},
		{"node port: the previous node is no longer Ready", []client.Object{svc(corev1.ServiceTypeNodePort, port443),
			node("a", true, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.1"}),
			node("c", false, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.3"})},
			onNodeC, &v1alpha1.PrincipalEndpoint{Address: "198.51.100.1", Port: 30443, Source: v1alpha1.PrincipalSourceNodePort}, v1alpha1.ReasonPrincipalFromService},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(tc.objects...).WithStatusSubresource(&corev1.Service{}, &corev1.Node{}).Build()
			got, err := DiscoverKeeping(context.Background(), c, v1alpha1.ArgoCDAgentAddonSpec{}, svcKey, tc.previous)
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason != tc.reason {
				t.Errorf("reason = %s, want %s (%s)", got.Reason, tc.reason, got.Message)
			}
			if (got.Endpoint == nil) != (tc.want == nil) || (got.Endpoint != nil && *got.Endpoint != *tc.want) {
				t.Errorf("endpoint = %+v, want %+v", got.Endpoint, tc.want)
			}
		})
	}
}
