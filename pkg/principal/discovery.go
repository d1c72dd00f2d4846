// Package principal finds the endpoint agents dial to reach the hub's argocd-agent principal.
package principal

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// DefaultPort is the port used when only an address is given.
const DefaultPort = 443

// Result is the outcome of discovery: an endpoint, or a reason and message saying why not.
type Result struct {
	Endpoint *v1alpha1.PrincipalEndpoint
	Reason   string
	Message  string
}

// SpecPort returns the port from the spec, accepting the number or its string form.
func SpecPort(p *intstr.IntOrString) (int32, bool) {
	if p == nil {
		return 0, false
	}
	if p.Type == intstr.Int {
		return p.IntVal, p.IntVal > 0
	}
	n, err := strconv.Atoi(p.StrVal)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return int32(n), true
}

// Discover resolves the endpoint. Order: spec address (and port); else the principal Service's
// load-balancer ingress (host name before IP); else a Ready node's ExternalIP (else InternalIP)
// with the node port. The spec port, when given, overrides a discovered one. Only API errors
// other than NotFound are returned as errors.
func Discover(ctx context.Context, r client.Reader, spec v1alpha1.ArgoCDAgentAddonSpec, service types.NamespacedName) (Result, error) {
	return DiscoverKeeping(ctx, r, spec, service, nil)
}

// DiscoverKeeping is Discover that holds on to the previous endpoint (the one agents dial
// now) across a brief loss: a load balancer re-provisioned, a Service re-created, another
// node becoming Ready. A NodePort endpoint keeps its node while that node is Ready, and when
// nothing is found the previous discovered endpoint is kept, with reason LastKnownEndpoint.
// Without this, every blip re-issues the principal's serving certificate, restarts the
// principal and rolls a new configuration to every agent, twice.
func DiscoverKeeping(ctx context.Context, r client.Reader, spec v1alpha1.ArgoCDAgentAddonSpec, service types.NamespacedName, previous *v1alpha1.PrincipalEndpoint) (Result, error) {
	res, err := discover(ctx, r, spec, service, previous)
	if err != nil || res.Endpoint != nil || previous == nil || previous.Source == v1alpha1.PrincipalSourceSpec || spec.PrincipalServerAddress != "" {
		return res, err
	}
	kept := *previous
	return Result{
		Endpoint: &kept,
		Reason:   v1alpha1.ReasonPrincipalLastKnown,
		Message:  fmt.Sprintf("%s; keeping the last known endpoint %s:%d (%s) until discovery finds one again", res.Message, kept.Address, kept.Port, kept.Source),
	}, nil
}

func discover(ctx context.Context, r client.Reader, spec v1alpha1.ArgoCDAgentAddonSpec, service types.NamespacedName, previous *v1alpha1.PrincipalEndpoint) (Result, error) {
	specPort, hasSpecPort := SpecPort(spec.PrincipalServerPort)
	if spec.PrincipalServerAddress != "" {
		port := int32(DefaultPort)
		if hasSpecPort {
			port = specPort
		}
		return Result{
			Endpoint: &v1alpha1.PrincipalEndpoint{Address: spec.PrincipalServerAddress, Port: port, Source: v1alpha1.PrincipalSourceSpec},
			Reason:   v1alpha1.ReasonPrincipalFromSpec,
			Message:  fmt.Sprintf("using principalServerAddress %s:%d from the spec", spec.PrincipalServerAddress, port),
		}, nil
	}

	svc := &corev1.Service{}
	if err := r.Get(ctx, service, svc); err != nil {
		if apierrors.IsNotFound(err) {
			return Result{
				Reason: v1alpha1.ReasonPrincipalNotFound,
				Message: fmt.Sprintf("principal Service %s not found; install the argocd-agent principal or set spec.argoCDAgentAddon.principalServerAddress",
					service),
			}, nil
		}
		return Result{}, err
	}
	sp, ok := servicePort(svc)
	if !ok {
		return Result{
			Reason:  v1alpha1.ReasonPrincipalNoAddress,
			Message: fmt.Sprintf("principal Service %s has no ports; set spec.argoCDAgentAddon.principalServerAddress and principalServerPort", service),
		}, nil
	}
	override := func(p int32) int32 {
		if hasSpecPort {
			return specPort
		}
		return p
	}

	if addr := loadBalancerAddress(svc); addr != "" {
		port := override(sp.Port)
		return Result{
			Endpoint: &v1alpha1.PrincipalEndpoint{Address: addr, Port: port, Source: v1alpha1.PrincipalSourceLoadBalancer},
			Reason:   v1alpha1.ReasonPrincipalFromService,
			Message:  fmt.Sprintf("using the load-balancer address %s:%d of Service %s", addr, port, service),
		}, nil
	}
	if sp.NodePort > 0 {
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes); err != nil {
			return Result{}, err
		}
		addr := nodeAddress(nodes.Items)
		if previous != nil && previous.Source == v1alpha1.PrincipalSourceNodePort {
			// Stay on the node agents dial while it is Ready (its ExternalIP if it gained one).
			if same := readyNodeWith(nodes.Items, previous.Address); same != nil {
				addr = nodeAddress([]corev1.Node{*same})
			}
		}
		if addr != "" {
			port := override(sp.NodePort)
			return Result{
				Endpoint: &v1alpha1.PrincipalEndpoint{Address: addr, Port: port, Source: v1alpha1.PrincipalSourceNodePort},
				Reason:   v1alpha1.ReasonPrincipalFromService,
				Message:  fmt.Sprintf("using node address %s and node port %d of Service %s", addr, port, service),
			}, nil
		}
	}
	return Result{
		Reason: v1alpha1.ReasonPrincipalNoAddress,
		Message: fmt.Sprintf("Service %s has no load-balancer address and no Ready node with a node port; set spec.argoCDAgentAddon.principalServerAddress",
			service),
	}, nil
}

// servicePort picks the port named https, else 443, else 8443, else the first one.
func servicePort(svc *corev1.Service) (corev1.ServicePort, bool) {
	if len(svc.Spec.Ports) == 0 {
		return corev1.ServicePort{}, false
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "https" {
			return p, true
		}
	}
	for _, want := range []int32{443, 8443} {
		for _, p := range svc.Spec.Ports {
			if p.Port == want {
				return p, true
			}
		}
	}
	return svc.Spec.Ports[0], true
}

func loadBalancerAddress(svc *corev1.Service) string {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.Hostname != "" {
			return in.Hostname
		}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP
		}
	}
	return ""
}

// nodeAddress prefers any Ready node's ExternalIP over any Ready node's InternalIP, scanning
// nodes by name so the choice is stable.
func nodeAddress(nodes []corev1.Node) string {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, want := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for i := range nodes {
			if !NodeReady(&nodes[i]) {
				continue
			}
			for _, a := range nodes[i].Status.Addresses {
				if a.Type == want && a.Address != "" {
					return a.Address
				}
			}
		}
	}
	return ""
}

// readyNodeWith returns the Ready node that has the address, or nil.
func readyNodeWith(nodes []corev1.Node, addr string) *corev1.Node {
	for i := range nodes {
		if !NodeReady(&nodes[i]) {
			continue
		}
		for _, a := range nodes[i].Status.Addresses {
			if a.Address == addr {
				return &nodes[i]
			}
		}
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
