package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/nodeapps"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// Derived names, computed by the project's own naming functions so that a rename there is
// caught here as a behaviour change rather than silently followed.
var (
	clientCertSecret = addon.ClientCertSecretName(addonName, signerName)
	agentClusterRole = addonName + ":" + addon.AgentName + ":" + agentNS
)

// ctxFor is the context for a scenario's API calls, its clean-ups included: it ends after
// them. Each wait has a timeout of its own, and each request of the suite's clients (s.hub,
// s.spokes, s.clientset) the requestTimeout; a client made for a watch has none, its waits
// bound it. A budget for the whole scenario on top failed a long scenario on a slow machine
// with every step inside its own time.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// hint names the logs worth reading when something times out.
func (s *suite) hint() string {
	return fmt.Sprintf("process logs in %s (OCM: hub-addon-manager.log, hub-placement-controller.log, <cluster>-klusterlet-agent.log); "+
		"the manager's pod log is saved there at the end as argocd-agent-addon-manager.log", s.f.LogDir())
}

// eventually polls cond every 200ms until it reports done, failing the test after timeout
// (or at once when a fleet process, the manager included, has died) with the last state cond
// described and where the logs are. It logs and returns how long it took.
func (s *suite) eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	if err := (poll.Waiter{Every: 200 * time.Millisecond, Guard: s.f.Err, CheckTimeout: 10 * time.Second}).Wait(context.Background(), timeout, cond); err != nil {
		t.Fatalf("waiting for %s: %v\n%s", what, err, s.hint())
	}
	took := time.Since(start)
	t.Logf("%-72s %7s", what, took.Round(10*time.Millisecond))
	return took
}

// getState turns a Get into an eventually state: found, or a description of why not.
func getState(err error, what string) string {
	if apierrors.IsNotFound(err) {
		return what + " not found"
	}
	return fmt.Sprintf("%s: %v", what, err)
}

// ---- hub objects ----

func (s *suite) goc(ctx context.Context) (*v1alpha1.GitOpsCluster, error) {
	g := &v1alpha1.GitOpsCluster{}
	err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: gocName}, g)
	return g, err
}

// describeConditions renders conditions as "Type=Status(Reason)" for messages.
func describeConditions(conds []metav1.Condition) string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; ")
}

// waitReady waits until the GitOpsCluster's status describes its current spec, it is Ready,
// and it selects and sees as available the given number of clusters.
func (s *suite) waitReady(t *testing.T, selected, available int32) time.Duration {
	t.Helper()
	return s.eventually(t, fmt.Sprintf("GitOpsCluster Ready=True, %d selected, %d available", selected, available), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			g, err := s.goc(ctx)
			if err != nil {
				return false, getState(err, "GitOpsCluster")
			}
			ok := g.Status.ObservedGeneration == g.Generation &&
				meta.IsStatusConditionTrue(g.Status.Conditions, v1alpha1.ConditionReady) &&
				g.Status.SelectedClusters == selected && g.Status.AvailableAgents == available
			return ok, fmt.Sprintf("generation %d observed %d, selected %d, available %d, unavailable %+v, conditions: %s",
				g.Generation, g.Status.ObservedGeneration, g.Status.SelectedClusters, g.Status.AvailableAgents,
				g.Status.UnavailableClusters, describeConditions(g.Status.Conditions))
		})
}

// setPlacement makes the Placement select exactly the given clusters (by the label every
// ManagedCluster carries with its name) and waits for OCM's placement controller to decide so.
func (s *suite) setPlacement(t *testing.T, clusters ...string) {
	t.Helper()
	s.setPlacementTolerating(t, nil, clusters...)
}

// setPlacementTolerating is setPlacement with the Placement's tolerations set too.
func (s *suite) setPlacementTolerating(t *testing.T, tolerations []clusterv1beta1.Toleration, clusters ...string) {
	t.Helper()
	ctx := ctxFor(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &clusterv1beta1.Placement{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: placement}, p); err != nil {
			return err
		}
		p.Spec.Predicates = placementPredicates(clusters)
		p.Spec.Tolerations = tolerations
		return s.hub.Update(ctx, p)
	})
	if err != nil {
		t.Fatalf("editing Placement %s/%s: %v", ns, placement, err)
	}
	s.waitDecision(t, clusters...)
}

func placementPredicates(clusters []string) []clusterv1beta1.ClusterPredicate {
	return []clusterv1beta1.ClusterPredicate{{
		RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: selectLabel, Operator: metav1.LabelSelectorOpIn, Values: append([]string(nil), clusters...),
			}}},
		},
	}}
}

func (s *suite) waitDecision(t *testing.T, clusters ...string) {
	t.Helper()
	want := append([]string(nil), clusters...)
	sort.Strings(want)
	what := fmt.Sprintf("OCM PlacementDecision of %s = %v", placement, want)
	if len(want) > 10 {
		what = fmt.Sprintf("OCM PlacementDecision of %s = %d clusters (%s … %s)", placement, len(want), want[0], want[len(want)-1])
	}
	s.eventually(t, what, time.Minute, func(ctx context.Context) (bool, string) {
		got, err := s.decided(ctx)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want), fmt.Sprintf("decided %v", got)
	})
}

func (s *suite) decided(ctx context.Context) ([]string, error) {
	list := &clusterv1beta1.PlacementDecisionList{}
	if err := s.hub.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{clusterv1beta1.PlacementLabel: placement}); err != nil {
		return nil, err
	}
	var got []string
	for _, d := range list.Items {
		for _, c := range d.Status.Decisions {
			got = append(got, c.ClusterName)
		}
	}
	sort.Strings(got)
	return got, nil
}

func (s *suite) labelClusters(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	for _, c := range s.f.Clusters() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mc := &clusterv1.ManagedCluster{}
			if err := s.hub.Get(ctx, client.ObjectKey{Name: c}, mc); err != nil {
				return err
			}
			if mc.Labels == nil {
				mc.Labels = map[string]string{}
			}
			mc.Labels[selectLabel] = c
			return s.hub.Update(ctx, mc)
		})
		if err != nil {
			t.Fatalf("labelling ManagedCluster %s: %v", c, err)
		}
	}
}

// hubCA is the hub CA certificate the signer signs with (tls.crt of argocd-agent-ca).
func (s *suite) hubCA(ctx context.Context) (*x509.Certificate, error) {
	sec := &corev1.Secret{}
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "argocd-agent-ca"}, sec); err != nil {
		return nil, err
	}
	certs, err := pki.ParseCertificates(sec.Data[corev1.TLSCertKey])
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("hub CA secret %s/argocd-agent-ca: %v", ns, err)
	}
	return certs[0], nil
}

// blocklist returns the keys of the principal's TLS blocklist (empty when it does not exist).
func (s *suite) blocklist(ctx context.Context) (map[string]string, error) {
	cm := &corev1.ConfigMap{}
	err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: ledger.BlocklistName}, cm)
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	return cm.Data, err
}

// ledger returns the signer's record, in the principal namespace, of the certificates issued
// to a cluster.
func (s *suite) ledger(ctx context.Context, cluster string) (map[string]string, error) {
	cm := &corev1.ConfigMap{}
	err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: ledger.LedgerName(cluster)}, cm)
	if apierrors.IsNotFound(err) {
		return map[string]string{}, nil
	}
	return cm.Data, err
}

// addonCSRs lists the hub CSRs of this signer labelled for a cluster.
func (s *suite) addonCSRs(ctx context.Context, cluster string) ([]certificatesv1.CertificateSigningRequest, error) {
	list := &certificatesv1.CertificateSigningRequestList{}
	if err := s.hub.List(ctx, list, client.MatchingLabels{
		signer.ClusterNameLabel: cluster, signer.AddonNameLabel: addonName,
	}); err != nil {
		return nil, err
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, csr := range list.Items {
		if csr.Spec.SignerName == signerName {
			out = append(out, csr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out, nil
}

func csrCondition(csr *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == typ {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

func describeCSR(csr *certificatesv1.CertificateSigningRequest) string {
	var conds []string
	for _, c := range csr.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return fmt.Sprintf("%s by %s: [%s], certificate %d bytes", csr.Name, csr.Spec.Username, strings.Join(conds, " "), len(csr.Status.Certificate))
}

// ---- managed-cluster objects ----

// agentObjects are the objects the AddOnTemplate puts on a managed cluster, read from that
// cluster's own API server. The install namespace itself is not among them: it is orphaned on
// removal (it is usually Argo CD's own namespace).
func agentObjects() []client.Object {
	m := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: agentNS, Name: name} }
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: m(addon.AgentName)},
		&corev1.ServiceAccount{ObjectMeta: m(addon.AgentName)},
		&rbacv1.Role{ObjectMeta: m(addon.AgentName)},
		&rbacv1.RoleBinding{ObjectMeta: m(addon.AgentName)},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: agentClusterRole}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agentClusterRole}},
		&corev1.Secret{ObjectMeta: m(addon.SpokeCASecretName)},
	}
}

func kindOf(o client.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
}

// agentObjectsState reports which agent objects exist on a cluster.
func (s *suite) agentObjectsState(ctx context.Context, cluster string) (present, missing []string, err error) {
	c := s.spokes[cluster]
	for _, o := range agentObjects() {
		name := kindOf(o) + " " + strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/")
		switch err := c.Get(ctx, client.ObjectKeyFromObject(o), o); {
		case err == nil:
			present = append(present, name)
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		default:
			return nil, nil, err
		}
	}
	return present, missing, nil
}

func (s *suite) waitAgentObjects(t *testing.T, cluster string) time.Duration {
	t.Helper()
	return s.eventually(t, cluster+": agent Deployment, ServiceAccount, RBAC and CA secret applied", 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			_, missing, err := s.agentObjectsState(ctx, cluster)
			if err != nil {
				return false, err.Error()
			}
			return len(missing) == 0, "missing: " + strings.Join(missing, ", ")
		})
}

func (s *suite) waitAgentObjectsGone(t *testing.T, cluster string) time.Duration {
	t.Helper()
	return s.eventually(t, cluster+": agent Deployment, ServiceAccount, RBAC and CA secret removed", 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			present, _, err := s.agentObjectsState(ctx, cluster)
			if err != nil {
				return false, err.Error()
			}
			return len(present) == 0, "still present: " + strings.Join(present, ", ")
		})
}

func (s *suite) agentDeployment(ctx context.Context, cluster string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, d)
	return d, err
}

func containerImage(d *appsv1.Deployment, name string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// clientCert reads the agent's client certificate from the secret OCM's registration agent
// writes on the managed cluster.
func (s *suite) clientCert(ctx context.Context, cluster string) (*x509.Certificate, *corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := s.spokes[cluster].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: clientCertSecret}, sec); err != nil {
		return nil, nil, err
	}
	if len(sec.Data[corev1.TLSCertKey]) == 0 || len(sec.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return nil, sec, fmt.Errorf("secret %s/%s has no tls.crt/tls.key yet", agentNS, clientCertSecret)
	}
	certs, err := pki.ParseCertificates(sec.Data[corev1.TLSCertKey])
	if err != nil || len(certs) == 0 {
		return nil, sec, fmt.Errorf("secret %s/%s: tls.crt: %v", agentNS, clientCertSecret, err)
	}
	return certs[0], sec, nil
}

// waitClientCert waits for a client certificate on the cluster that is not one of `not`,
// checks it against the hub CA and the signer's ledger, remembers it and returns it.
func (s *suite) waitClientCert(t *testing.T, cluster string, not ...string) *x509.Certificate {
	t.Helper()
	var cert *x509.Certificate
	s.eventually(t, fmt.Sprintf("%s: client certificate secret %s/%s (new)", cluster, agentNS, clientCertSecret), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			c, _, err := s.clientCert(ctx, cluster)
			if err != nil {
				return false, err.Error()
			}
			if slices.Contains(not, pki.Fingerprint(c)) {
				return false, "still the previous certificate " + pki.Fingerprint(c)
			}
			cert = c
			return true, ""
		})
	ctx := ctxFor(t)
	s.checkIssuedCert(t, ctx, cluster, cert)
	s.recordIssued(cluster, pki.Fingerprint(cert))
	return cert
}

// checkIssuedCert: issued by the hub CA for client auth, the subject OCM asked for, about the
// manager's --agent-cert-validity, and recorded in the signer's ledger of that cluster (so it
// was this project's signer, not OCM's, that signed it).
func (s *suite) checkIssuedCert(t *testing.T, ctx context.Context, cluster string, cert *x509.Certificate) {
	t.Helper()
	ca, err := s.hubCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.VerifyChain(cert, []*x509.Certificate{ca}, x509.ExtKeyUsageClientAuth, time.Now()); err != nil {
		t.Errorf("%s: client certificate does not verify against the hub CA %q: %v", cluster, ca.Subject, err)
	}
	if cert.Issuer.String() != ca.Subject.String() {
		t.Errorf("%s: issuer %q, want the hub CA %q", cluster, cert.Issuer, ca.Subject)
	}
	if want := signer.DefaultAgentUser(cluster, addonName); cert.Subject.CommonName != want {
		t.Errorf("%s: subject CN %q, want %q", cluster, cert.Subject.CommonName, want)
	}
	// OCM v1.2.1's addon-manager asks for addon-framework v1.2.0's default groups, which add
	// system:authenticated to the two the signer requires.
	want := signer.DefaultAgentGroups(cluster, addonName)
	got := slices.DeleteFunc(slices.Clone(cert.Subject.Organization), func(o string) bool { return o == signer.OCMAuthenticatedGroup })
	if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) || len(cert.Subject.Organization)-len(got) > 1 {
		t.Errorf("%s: subject O %q, want %q (and optionally %q)", cluster, cert.Subject.Organization, want, signer.OCMAuthenticatedGroup)
	}
	if life := time.Until(cert.NotAfter); life > agentCertValidity+time.Minute || life < agentCertValidity-10*time.Minute {
		t.Errorf("%s: certificate expires in %s, want about --agent-cert-validity=%s", cluster, life.Round(time.Second), agentCertValidity)
	}
	l, err := s.ledger(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l[pki.Fingerprint(cert)]; !ok {
		t.Errorf("%s: certificate %s is not in the signer's ledger %s/%s (%d entries): not signed by this project's signer?",
			cluster, pki.Fingerprint(cert), ns, ledger.LedgerName(cluster), len(l))
	}
	t.Logf("%s: client certificate CN=%s issuer %q, expires %s, fingerprint %s…",
		cluster, cert.Subject.CommonName, cert.Issuer.CommonName, cert.NotAfter.UTC().Format(time.RFC3339), pki.Fingerprint(cert)[:16])
}

// waitAgentRunning waits until the agent Deployment on cluster has rolled out: its pod, the
// stand-in agent and the cert-reloader, passes its readiness probe on the cluster's node.
// OCM's work agent feeds the Deployment's status back to the hub, where the addon manager
// turns it into the ManagedClusterAddOn's Available condition.
func (s *suite) waitAgentRunning(t *testing.T, cluster string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: addon.AgentName}}
	s.eventually(t, cluster+": agent pod running and ready", 3*time.Minute, func(ctx context.Context) (bool, string) {
		ok, state := fleet.WorkloadReady(ctx, s.spokes[cluster], d)
		if !ok {
			state += "\n" + nodeapps.PodReport(ctx, s.f, cluster, agentNS)
		}
		return ok, state
	})
}

func (s *suite) mca(ctx context.Context, cluster string) (*addonv1alpha1.ManagedClusterAddOn, error) {
	m := &addonv1alpha1.ManagedClusterAddOn{}
	err := s.hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addonName}, m)
	return m, err
}

func (s *suite) waitHubObject(t *testing.T, what string, obj client.Object, present bool) time.Duration {
	t.Helper()
	verb := "exists"
	if !present {
		verb = "is deleted"
	}
	key := client.ObjectKeyFromObject(obj)
	return s.eventually(t, fmt.Sprintf("hub: %s %s %s", what, strings.TrimPrefix(key.String(), "/"), verb), 2*time.Minute,
		func(ctx context.Context) (bool, string) {
			err := s.hub.Get(ctx, key, obj)
			switch {
			case err == nil:
				return present, "it exists"
			case apierrors.IsNotFound(err):
				return !present, "not found"
			default:
				return false, err.Error()
			}
		})
}

// gitRepo serves, for the length of the test, a repository name from a Git server kept in dir
// of the fleet's folder, with files committed; it returns the repository and the commit. The
// server listens on the fleet's host address, which the nodes' pods reach.
func (s *suite) gitRepo(t *testing.T, dir, name string, files map[string]string) (*fleet.GitRepo, string) {
	t.Helper()
	git, err := fleet.StartGitServerOn(filepath.Join(s.f.Dir(), dir), s.f.HostAddress())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := git.Close(); err != nil {
			t.Errorf("stopping the Git server: %v", err)
		}
	})
	repo, err := git.CreateRepo(name)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := repo.Commit(files, name)
	if err != nil {
		t.Fatal(err)
	}
	return repo, sha
}
