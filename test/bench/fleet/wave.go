package main

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// managedClusters is the group OCM puts every cluster's registration agent in.
const managedClusters = "system:open-cluster-management:managed-clusters"

// agentClients lets the benchmark ask for certificates as each cluster's registration agent:
// it grants those identities what OCM's hub grants them for CSRs and returns a client maker
// that impersonates one cluster's agent over a connection pool shared by all (a TLS handshake
// per cluster would measure the benchmark's own client).
func agentClients(ctx context.Context, env *testenv.Env) (func(cluster string) (kubernetes.Interface, error), error) {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-csr-requester"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-csr-requester"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: managedClusters}}}
	// Any cluster's agent will do to learn that the grant is in effect.
	someAgent := testenv.Identity{User: signer.RequesterPrefix("any") + "agent", Groups: []string{signer.ClusterGroup("any"), managedClusters}}
	createCSR := authorizationv1.ResourceAttributes{Verb: "create", Group: certificatesv1.GroupName, Resource: "certificatesigningrequests"}
	if err := testenv.Grant(ctx, env.Client, someAgent, []authorizationv1.ResourceAttributes{createCSR}, role, binding); err != nil {
		return nil, fmt.Errorf("the agents' CSR grant: %w", err)
	}
	base, err := rest.TransportFor(env.Config)
	if err != nil {
		return nil, err
	}
	return func(cluster string) (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: env.Config.Host, QPS: -1, Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
			UserName: signer.RequesterPrefix(cluster) + "agent",
			Groups:   []string{signer.ClusterGroup(cluster), managedClusters, "system:authenticated"},
		}, base)})
	}, nil
}

// renewalWave makes every cluster's registration agent ask for a new certificate at once, as
// each cluster's own identity (newAgent, agentClients'), and times until all are signed.
func renewalWave(ctx context.Context, env *testenv.Env, newAgent func(cluster string) (kubernetes.Interface, error), clusters []string) (took, createdIn time.Duration, err error) {
	// Watch rather than poll: listing thousands of CSRs with their certificates every few
	// hundred milliseconds would load the API server more than the signer does. In protobuf,
	// the manager's encoding of each event serves this watch too.
	admin, err := kubernetes.NewForConfig(protobuf(env.Config))
	if err != nil {
		return 0, 0, err
	}
	// From now on only: CSRs of earlier phases do not count.
	now, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, 0, err
	}
	timeout := int64((30 * time.Minute).Seconds())
	w, err := admin.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout, ResourceVersion: now.ResourceVersion})
	if err != nil {
		return 0, 0, err
	}
	defer func() { w.Stop() }()
	start := time.Now()
	created := make(chan error, 1)
	go func() { created <- askForCertificates(ctx, newAgent, clusters) }()
	signed := map[string]bool{}
	deadline := time.After(20 * time.Minute)
	for len(signed) < len(clusters) {
		select {
		case err := <-created:
			if err != nil {
				return 0, 0, err
			}
			createdIn = time.Since(start)
			created = nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				next, err := catchUp(ctx, admin, signed, timeout)
				if err != nil {
					return 0, 0, err
				}
				w = next
				continue
			}
			csr, isCSR := ev.Object.(*certificatesv1.CertificateSigningRequest)
			if !isCSR {
				continue
			}
			for _, cond := range csr.Status.Conditions {
				if cond.Type == certificatesv1.CertificateFailed {
					return 0, 0, fmt.Errorf("CSR %s of the wave was refused: %s", csr.Name, cond.Message)
				}
			}
			if len(csr.Status.Certificate) > 0 {
				signed[csr.Name] = true
			}
		case <-deadline:
			return 0, 0, fmt.Errorf("%d of %d CSRs signed after 20 minutes", len(signed), len(clusters))
		}
	}
	return time.Since(start), createdIn, nil
}

// askForCertificates creates a CSR for every cluster, as the cluster's own registration agent.
func askForCertificates(ctx context.Context, newAgent func(cluster string) (kubernetes.Interface, error), clusters []string) error {
	return fakehub.ParallelN(agentsInFlight, clusters, func(cluster string) error {
		cs, err := newAgent(cluster)
		if err != nil {
			return err
		}
		csr, err := testenv.AgentCSR(cluster, cluster, addonName, "open-cluster-management.io/"+addonName)
		if err != nil {
			return err
		}
		_, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		return err
	})
}

// catchUp follows a watch the API server dropped (a watcher that falls behind is dropped): one
// list marks the CSRs signed meanwhile, and a new watch goes on from there.
func catchUp(ctx context.Context, admin kubernetes.Interface, signed map[string]bool, timeout int64) (watch.Interface, error) {
	list, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if len(list.Items[i].Status.Certificate) > 0 {
			signed[list.Items[i].Name] = true
		}
	}
	return admin.CertificatesV1().CertificateSigningRequests().Watch(ctx, metav1.ListOptions{TimeoutSeconds: &timeout, ResourceVersion: list.ResourceVersion})
}
