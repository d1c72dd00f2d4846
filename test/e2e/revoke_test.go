package e2e

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/agentsecret"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/chartrender"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// renderedPrincipalArgs renders the chart as `helm install --set principal.install=true` would
// and returns the principal container's arguments.
func renderedPrincipalArgs(t *testing.T) []string {
	t.Helper()
	manifest, _, err := chartrender.Render(filepath.Join(testenv.RepoRoot(), "charts", "argocd-agent-addon"), ns, "argocd-agent-addon",
		map[string]any{"principal": map[string]any{"install": true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(manifest, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.GetKind() != "Deployment" || u.GetName() != "argocd-agent-principal" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		var out []string
		for _, a := range containers[0].(map[string]any)["args"].([]any) {
			out = append(out, a.(string))
		}
		return out
	}
	t.Fatal("the chart renders no principal Deployment")
	return nil
}

func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkRealDeploymentArgs checks, against what ran on the fleet, the arguments a real
// deployment runs with (no argocd-agent binary can be built here): the chart's principal must
// name the real agent certificate's cluster as the agent and forward its hub namespace; the
// agent on the cluster must read the files OCM mounts and be allowed the calls argocd-agent's
// agent makes.
func (s *suite) checkRealDeploymentArgs(t *testing.T, ctx context.Context, cluster string) {
	t.Helper()
	cert, _, err := s.clientCert(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	pargs := renderedPrincipalArgs(t)
	auth, _ := flagValue(pargs, "--auth")
	re, err := regexp.Compile(strings.TrimPrefix(auth, "mtls:subject:"))
	if err != nil {
		t.Fatalf("principal --auth %q: %v", auth, err)
	}
	if m := re.FindStringSubmatch(cert.Subject.String()); len(m) < 2 || m[1] != cluster {
		t.Errorf("the principal's --auth %q names agent %v in the real certificate subject %q, want %s", auth, m, cert.Subject.String(), cluster)
	}
	allowed, _ := flagValue(pargs, "--allowed-namespaces")
	if !slices.ContainsFunc(strings.Split(allowed, ","), func(g string) bool { ok, _ := path.Match(g, cluster); return ok }) {
		t.Errorf("the principal's --allowed-namespaces=%q does not forward Applications of hub namespace %s", allowed, cluster)
	}
	for _, want := range []string{"--require-client-certs=true", "--tls-ca-secret-name=" + names.CASecretName, "--namespace-create-enable=false"} {
		if !slices.Contains(pargs, want) {
			t.Errorf("principal args %v lack %s", pargs, want)
		}
	}

	d, err := s.agentDeployment(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	dir := addon.ClientCertMountDir(signerName)
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--creds=mtls:any", "--root-ca-secret-name=" + addon.SpokeCASecretName,
		"--tls-client-cert=" + dir + "/tls.crt", "--tls-client-key=" + dir + "/tls.key"} {
		if !slices.Contains(args, want) {
			t.Errorf("%s: agent args %v lack %s", cluster, args, want)
		}
	}
	mounted := false
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.MountPath == dir
	}
	if !mounted {
		t.Errorf("%s: nothing is mounted at %s, where the agent reads its certificate (OCM adds that mount)", cluster, dir)
	}
	// The RBAC OCM's work agent applied, asked on the cluster's own API server.
	agent := testenv.ServiceAccount(agentNS, addon.AgentName)
	for _, c := range []authorizationv1.ResourceAttributes{
		{Verb: "get", Group: "argoproj.io", Resource: "applications", Namespace: cluster, Name: "guestbook"},
		{Verb: "watch", Group: "argoproj.io", Resource: "applications", Namespace: agentNS},
		{Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: agentNS},
		{Verb: "list", Resource: "events", Namespace: "guestbook"},
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: "guestbook", Name: "guestbook-ui"},
		{Verb: "watch", Resource: "namespaces"},
	} {
		allowed, _, err := agent.Allowed(ctx, s.spokes[cluster], c)
		if err != nil {
			t.Fatal(err)
		}
		if !allowed {
			t.Errorf("%s: the agent may not %s %s/%s in %q, which argocd-agent's agent does", cluster, c.Verb, c.Group, c.Resource, c.Namespace)
		}
	}
}

// Scenario: a person revokes a live cluster's agent, OCM's forced renewal is refused, the
// GitOpsCluster is re-created from YAML that never listed the cluster and the cluster stays
// revoked; lifting the revocation re-admits the agent with a new key while its revoked
// certificate stays blocked.
func (s *suite) scenarioRevokeAction(t *testing.T) {
	ctx := ctxFor(t)
	const cluster = "cluster2"
	old, sec, err := s.clientCert(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	oldFP := pki.Fingerprint(old)
	s.setRevoked(t, cluster)
	start := time.Now()
	s.eventually(t, "hub: cluster2 revoked", time.Minute, func(ctx context.Context) (bool, string) {
		bl, err := s.blocklist(ctx)
		if err != nil {
			return false, err.Error()
		}
		if _, ok := bl[oldFP]; !ok {
			return false, "cluster2's certificate is not blocked"
		}
		err = s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsecret.Name(cluster)}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("cluster secret still there (%v)", err)
		}
		rev := &v1alpha1.AgentRevocation{}
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, rev); err != nil {
			return false, fmt.Sprintf("AgentRevocation: %v", err)
		}
		if !meta.IsStatusConditionTrue(rev.Status.Conditions, v1alpha1.ConditionEnforced) {
			return false, fmt.Sprintf("AgentRevocation not enforced yet: %s", describeConditions(rev.Status.Conditions))
		}
		g, err := s.goc(ctx)
		if err != nil || g.Status.RevokedAgents != 1 {
			return false, fmt.Sprintf("status.revokedAgents not 1 yet (%v)", err)
		}
		return true, ""
	})
	t.Logf("cluster2 revoked in %s", time.Since(start).Round(100*time.Millisecond))

	// OCM's renewal, forced: the registration agent asks again and is refused.
	before, err := s.addonCSRs(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.spokes[cluster].Delete(ctx, &corev1.Secret{ObjectMeta: sec.ObjectMeta}); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "hub: cluster2's renewal refused as Revoked", 2*time.Minute, func(ctx context.Context) (bool, string) {
		csrs, err := s.addonCSRs(ctx, cluster)
		if err != nil {
			return false, err.Error()
		}
		for i := range csrs {
			if slices.ContainsFunc(before, func(b certificatesv1.CertificateSigningRequest) bool { return b.Name == csrs[i].Name }) {
				continue
			}
			if c := csrCondition(&csrs[i], certificatesv1.CertificateFailed); c != nil && c.Reason == signer.ReasonRevoked {
				if len(csrs[i].Status.Certificate) > 0 {
					return false, "a revoked request carries a certificate"
				}
				return true, ""
			}
		}
		return false, describeCSRs(csrs)
	})
	if _, _, err := s.clientCert(ctx, cluster); err == nil {
		t.Fatal("cluster2 got a certificate while revoked")
	}

	// A GitOps re-apply: the GitOpsCluster is deleted and created again from YAML that never
	// listed cluster2. The revocation lives on the principal and holds.
	s.recreateGitOpsCluster(t)
	for _, c := range []string{"cluster1", cluster} {
		s.waitAgentObjects(t, c)
	}
	// cluster2's agent pod cannot start: it has no client certificate to mount.
	s.waitAgentRunning(t, "cluster1")
	s.eventually(t, "hub: re-created GitOpsCluster sees cluster2 revoked", time.Minute, func(ctx context.Context) (bool, string) {
		g, err := s.goc(ctx)
		if err != nil || g.Status.ObservedGeneration != g.Generation || g.Status.RevokedAgents != 1 {
			return false, fmt.Sprintf("status.revokedAgents not 1 yet (%v)", err)
		}
		return true, ""
	})
	time.Sleep(5 * time.Second)
	if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsecret.Name(cluster)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the re-created GitOpsCluster registered revoked cluster2 again (%v)", err)
	}
	if _, _, err := s.clientCert(ctx, cluster); err == nil {
		t.Fatal("cluster2 got a certificate after its GitOpsCluster was re-created")
	}
	if ok, _ := fleet.WorkloadReady(ctx, s.spokes[cluster], &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: addon.AgentName}}); ok {
		t.Error("cluster2's agent pod runs while it is revoked")
	}

	// Lift: a person deletes the AgentRevocation. The agent is re-admitted with a new key; the
	// certificate revoked for compromise stays blocked.
	if err := s.hub.Delete(ctx, &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}); err != nil {
		t.Fatal(err)
	}
	lifted := time.Now()
	fresh := s.waitClientCert(t, cluster, oldFP)
	t.Logf("cluster2 re-admitted %s after the lift", time.Since(lifted).Round(100*time.Millisecond))
	if bytes.Equal(fresh.RawSubjectPublicKeyInfo, old.RawSubjectPublicKeyInfo) {
		t.Error("cluster2 was re-admitted with its revoked key")
	}
	s.eventually(t, "hub: cluster2 registered again", time.Minute, func(ctx context.Context) (bool, string) {
		if err := s.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsecret.Name(cluster)}, &corev1.Secret{}); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	bl, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bl[oldFP]; !ok {
		t.Error("lifting the revocation unblocked the certificate revoked for compromise")
	}
	if _, ok := bl[pki.Fingerprint(fresh)]; ok {
		t.Error("the new certificate is blocked")
	}
	s.waitAgentRunning(t, cluster)
	s.waitReady(t, 2, 2)
}

// recreateGitOpsCluster deletes the GitOpsCluster and creates it again from its spec without
// spec.revokedClusters, as a GitOps tool re-applying its YAML would.
func (s *suite) recreateGitOpsCluster(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t)
	g, err := s.goc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again := &v1alpha1.GitOpsCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: g.Name, Labels: g.Labels},
		Spec:       *g.Spec.DeepCopy(),
	}
	again.Spec.RevokedClusters = nil
	if err := s.hub.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "hub: GitOpsCluster deleted", 2*time.Minute, func(ctx context.Context) (bool, string) {
		_, err := s.goc(ctx)
		return apierrors.IsNotFound(err), getState(err, "GitOpsCluster")
	})
	if err := s.hub.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) setRevoked(t *testing.T, clusters ...string) {
	t.Helper()
	ctx := ctxFor(t)
	g, err := s.goc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(g.DeepCopy())
	g.Spec.RevokedClusters = clusters
	if err := s.hub.Patch(ctx, g, patch); err != nil {
		t.Fatal(err)
	}
}
