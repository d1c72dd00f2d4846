package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/signer"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/status"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// readmeExample is the GitOpsCluster of the install steps (examples/gitopscluster.yaml), which
// is the upstream README's, applied unchanged (TestInstallExampleIsUpstreamsReadme).
var readmeExample = mustReadExample("gitopscluster.yaml")

func mustReadExample(name string) string {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testFleetE2E runs the scenarios in order on the package's fleet; each needs the state the
// previous one left, so the first failure skips the rest.
func testFleetE2E(t *testing.T, s *suite) {
	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		{"1_ReadmeExampleInstallsAgentOnCluster1", s.scenarioInstall},
		{"2_PlacementEditsMoveAgents", s.scenarioPlacementEdits},
		{"3_ProgressiveRollbackAndUpgrade", s.scenarioProgressiveRollout},
		{"4_CertificateRotationAndReload", s.scenarioRotation},
		{"5_ForgedCSRIsRefused", s.scenarioForgedCSR},
		{"6_RevokeActionAndUndo", s.scenarioRevokeAction},
		{"7_PagedFleetOf250NeverRevokesALiveAgent", s.scenarioPagedFleet},
		{"8_DeletionCleansUp", s.scenarioDeletion},
	}
	failed := ""
	for _, sc := range scenarios {
		if failed != "" {
			t.Run(sc.name, func(t *testing.T) { t.Skipf("needs the state scenario %s should have left", failed) })
			continue
		}
		start := time.Now()
		ok := t.Run(sc.name, sc.run)
		t.Logf("scenario %s: %s (%s)", sc.name, map[bool]string{true: "passed", false: "FAILED"}[ok], time.Since(start).Round(100*time.Millisecond))
		if !ok {
			failed = sc.name
		}
	}
	t.Logf("fleet up in %s; whole package so far %s; logs in %s", s.f.UpTime.Round(100*time.Millisecond),
		time.Since(s.started).Round(100*time.Millisecond), s.f.LogDir())
}

// Scenario 1: the README example, a Placement selecting cluster1 and the principal Service.
func (s *suite) scenarioInstall(t *testing.T) {
	ctx := ctxFor(t)
	s.labelClusters(t)
	p := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: placement},
		Spec:       clusterv1beta1.PlacementSpec{Predicates: placementPredicates([]string{"cluster1"})},
	}
	if err := s.hub.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The argocd-agent principal's Service, as its install creates it. No cloud runs here, so
	// the test writes the status a load balancer would report: ingress IP 127.0.0.1.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app.kubernetes.io/name": "argocd-agent-principal"},
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP}},
		},
	}
	if err := s.hub.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "127.0.0.1"}}
	if err := s.hub.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}

	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(readmeExample), &u.Object); err != nil {
		t.Fatal(err)
	}
	// The one change: argocd-agent's image cannot be built here, so the agents run its stand-in
	// (test/node/images/argocd-agent), named as a user names an image of their own.
	if err := unstructured.SetNestedField(u.Object, s.agentImage, "spec", "argoCDAgentAddon", "image"); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	if err := s.hub.Create(ctx, u); err != nil {
		t.Fatalf("applying the README GitOpsCluster with the stand-in agent image: %v", err)
	}
	s.waitDecision(t, "cluster1")

	// On cluster1's own API server, applied by OCM's work agent.
	s.waitAgentObjects(t, "cluster1")
	d, err := s.agentDeployment(ctx, "cluster1")
	if err != nil {
		t.Fatal(err)
	}
	if !ownedByAppliedManifestWork(d) {
		t.Errorf("cluster1: Deployment %s/%s has no AppliedManifestWork owner: not applied by OCM's work agent? owners %+v", agentNS, d.Name, d.OwnerReferences)
	}
	if got := containerImage(d, addon.AgentContainerName); got != s.agentImage {
		t.Errorf("cluster1: agent image %q, want the spec's %q", got, s.agentImage)
	}
	if got := containerImage(d, addon.ReloaderContainerName); got != s.reloaderImg {
		t.Errorf("cluster1: cert-reloader image %q, want --reloader-image %q", got, s.reloaderImg)
	}
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--server-address=127.0.0.1", "--server-port=443", "--agent-mode=managed", "--namespace=" + agentNS} {
		if !strings.Contains(args, want) {
			t.Errorf("cluster1: agent args %q lack %q", args, want)
		}
	}
	ca := &corev1.Secret{}
	if err := s.spokes["cluster1"].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.SpokeCASecretName}, ca); err != nil {
		t.Fatal(err)
	}
	if keys := mapsKeys(ca.Data); !slices.Equal(keys, []string{"ca.crt"}) {
		t.Errorf("cluster1: secret %s/%s holds %v, want only ca.crt (argocd-agent parses every key as a certificate)", agentNS, ca.Name, keys)
	}
	hubCA, err := s.hubCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bundle, err := pki.ParseCertificates(ca.Data["ca.crt"]); err != nil || !slices.ContainsFunc(bundle, hubCA.Equal) {
		t.Errorf("cluster1: ca.crt does not hold the hub CA %q (err %v)", hubCA.Subject, err)
	}

	// The client certificate: OCM's registration agent on cluster1 asks with a CSR on the hub,
	// this project's signer signs it, and the registration agent stores it on cluster1.
	cert := s.waitClientCert(t, "cluster1")
	s.checkRealDeploymentArgs(t, ctx, "cluster1")
	csrs, err := s.addonCSRs(ctx, "cluster1")
	if err != nil {
		t.Fatal(err)
	}
	var signed *certificatesv1.CertificateSigningRequest
	for i := range csrs {
		if c, err := pki.ParseCertificates(csrs[i].Status.Certificate); err == nil && len(c) > 0 && c[0].Equal(cert) {
			signed = &csrs[i]
		}
	}
	if signed == nil {
		t.Fatalf("no hub CSR of signer %s for cluster1 carries the certificate found on cluster1; CSRs: %v", signerName, describeCSRs(csrs))
	}
	if !strings.HasPrefix(signed.Spec.Username, signer.RequesterPrefix("cluster1")) {
		t.Errorf("CSR %s was made by %q, want cluster1's registration agent (%s…)", signed.Name, signed.Spec.Username, signer.RequesterPrefix("cluster1"))
	}
	approved := csrCondition(signed, certificatesv1.CertificateApproved)
	if approved == nil || approved.Status != corev1.ConditionTrue {
		t.Errorf("CSR %s is signed but not Approved: %s", signed.Name, describeCSR(signed))
	} else if approved.Reason != signer.ReasonApproved {
		// OCM's template addon-manager approves every CSR of the template's signer name
		// without checks; when it is first, the signer still checks and signs, but adds no
		// second approval. It cannot sign itself: our CA key is ECDSA and it takes PKCS#1 (RSA) only.
		t.Logf("CSR %s was approved first by OCM's addon-manager (reason %s); this project's signer checked and signed it (ledger entry above)", signed.Name, approved.Reason)
	} else {
		t.Logf("CSR %s approved with reason %s and signed by this project's signer", signed.Name, approved.Reason)
	}
	s.waitHubObject(t, "Argo CD cluster secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-cluster1"}}, true)

	s.waitAgentRunning(t, "cluster1")
	s.waitReady(t, 1, 1)
	t.Logf("README example to Ready on a real fleet: %s", time.Since(applied).Round(100*time.Millisecond))
	s.checkTemplateSpecHash(t, "cluster1")
	s.checkStatusCommand(t, u.GetNamespace()+"/"+u.GetName(), "cluster1")
}

// checkStatusCommand runs the status command's printer on the hub (as `argocd-agent-addon
// status` does) and checks that it shows the GitOpsCluster Ready, and the cluster with its agent
// available, the agent image OCM applied and the certificates the ledger holds for it.
func (s *suite) checkStatusCommand(t *testing.T, goc, cluster string) {
	t.Helper()
	s.eventually(t, "argocd-agent-addon status shows "+cluster+" ready", time.Minute, func(ctx context.Context) (bool, string) {
		var out strings.Builder
		if err := status.Print(ctx, s.hub, &out, status.Options{AddonName: addonName, Now: time.Now()}); err != nil {
			return false, err.Error()
		}
		text := out.String()
		var gocLine, clusterLine string
		for _, l := range strings.Split(text, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) > 0 && f[0] == goc:
				gocLine = l
			case len(f) > 0 && f[0] == cluster:
				clusterLine = l
			}
		}
		ok := strings.Contains(gocLine, " True") && !strings.Contains(text, "=False") && strings.Contains(clusterLine, "Available=True") &&
			strings.Contains(clusterLine, "argocd-agent") && strings.Contains(clusterLine, ", expiring ")
		if ok {
			t.Logf("argocd-agent-addon status:\n%s", text)
		}
		return ok, text
	})
}

// checkTemplateSpecHash compares the spec hash OCM's addon manager recorded for the agent's
// AddOnTemplate in the cluster's ManagedClusterAddOn (desired and last applied) with
// addon.ConfigSpecHash of the template read from the hub. The principal's trust rollout
// compares these two to decide when every agent trusts a new anchor; if the recipes differed,
// it would wait forever (or never).
func (s *suite) checkTemplateSpecHash(t *testing.T, cluster string) {
	t.Helper()
	var ref addonv1alpha1.ConfigReference
	s.eventually(t, cluster+": ManagedClusterAddOn has applied its AddOnTemplate", time.Minute, func(ctx context.Context) (bool, string) {
		m, err := s.mca(ctx, cluster)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range m.Status.ConfigReferences {
			if r.Resource != "addontemplates" {
				continue
			}
			ref = r
			if r.DesiredConfig == nil || r.LastAppliedConfig == nil || r.DesiredConfig.SpecHash == "" ||
				r.LastAppliedConfig.SpecHash != r.DesiredConfig.SpecHash {
				return false, fmt.Sprintf("addontemplates reference %+v", r)
			}
			return true, ""
		}
		return false, fmt.Sprintf("no addontemplates reference in %+v", m.Status.ConfigReferences)
	})
	ctx := ctxFor(t)
	tpl := &addonv1alpha1.AddOnTemplate{}
	if err := s.hub.Get(ctx, client.ObjectKey{Name: ref.DesiredConfig.Name}, tpl); err != nil {
		t.Fatal(err)
	}
	want, err := addon.ConfigSpecHash(tpl)
	if err != nil {
		t.Fatal(err)
	}
	if ref.DesiredConfig.SpecHash != want || ref.LastAppliedConfig.SpecHash != want {
		t.Errorf("%s: OCM's spec hash of AddOnTemplate %s: desired %s, last applied %s; addon.ConfigSpecHash gives %s",
			cluster, tpl.Name, ref.DesiredConfig.SpecHash, ref.LastAppliedConfig.SpecHash, want)
	} else {
		t.Logf("%s: OCM's spec hash of AddOnTemplate %s (desired and last applied) is addon.ConfigSpecHash's: %s", cluster, tpl.Name, want)
	}
}

// Scenario 2: the Placement gains cluster2, then loses cluster1.
func (s *suite) scenarioPlacementEdits(t *testing.T) {
	ctx := ctxFor(t)
	s.setPlacement(t, "cluster1", "cluster2")
	s.waitAgentObjects(t, "cluster2")
	s.waitClientCert(t, "cluster2")
	s.waitHubObject(t, "Argo CD cluster secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-cluster2"}}, true)
	s.waitAgentRunning(t, "cluster2")
	s.waitReady(t, 2, 2)

	cluster1Certs := s.issuedTo("cluster1")
	s.setPlacement(t, "cluster2")
	s.waitAgentObjectsGone(t, "cluster1")
	// OCM's registration agent stops the addon's registration and deletes the key material.
	s.eventually(t, "cluster1: client certificate secret removed by OCM's registration agent", time.Minute,
		func(ctx context.Context) (bool, string) {
			err := s.spokes["cluster1"].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: clientCertSecret}, &corev1.Secret{})
			return apierrors.IsNotFound(err), getState(err, "secret")
		})
	s.waitHubObject(t, "Argo CD cluster secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-cluster1"}}, false)
	s.eventually(t, fmt.Sprintf("hub: cluster1's %d certificate(s) on the principal's %s", len(cluster1Certs), ledger.BlocklistName), time.Minute,
		func(ctx context.Context) (bool, string) {
			bl, err := s.blocklist(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, fp := range cluster1Certs {
				if _, ok := bl[fp]; !ok {
					return false, fmt.Sprintf("%s not listed (%d keys)", fp, len(bl))
				}
			}
			return true, ""
		})
	bl, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, fp := range s.issuedTo("cluster2") {
		if _, ok := bl[fp]; ok {
			t.Errorf("cluster2's certificate %s is on the blocklist, but cluster2 is still selected", fp)
		}
	}
	// The install namespace is Argo CD's: orphaned, never deleted.
	if err := s.spokes["cluster1"].Get(ctx, client.ObjectKey{Name: agentNS}, &corev1.Namespace{}); err != nil {
		t.Errorf("cluster1: namespace %s should stay (orphaned on removal): %v", agentNS, err)
	}
	if err := s.spokes["cluster2"].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: addon.AgentName}, &appsv1.Deployment{}); err != nil {
		t.Errorf("cluster2's agent should be untouched: %v", err)
	}
	s.waitReady(t, 1, 1)
}

// Scenario 3: with both clusters selected, the agents are rolled back to the previous
// argocd-agent release and upgraded again (the stand-in image under both releases' tags), each
// Progressive with maxConcurrency 1: one cluster after the other.
//
// OCM v1.2.1's semantics (pkg/addon/controllers/addonconfiguration and addonprogressing): a
// cluster's rollout Succeeds when its ManagedClusterAddOn's Progressing condition turns
// Completed, which happens once the addon's ManifestWork with the new config is Applied and
// Available. The work agent's Available means the resources exist on the managed cluster, not
// that the Deployment is ready, so the next cluster is released once the first cluster's
// Deployment was updated, whether or not its pod would run; the kubelet then replaces the pod.
//
// What is asserted: OCM releases the clusters one at a time (the hub's rollout decisions, the
// part this project configures), the first released cluster's Deployment is updated before the
// second cluster is released, and the second cluster's Deployment changes only after its
// release; meanwhile status.agentsOnOtherVersion counts the cluster not yet moved. That last
// point holds because each AddOnDeploymentConfig is named after its content: OCM v1.2.1
// renders an addon's ManifestWork from the config it finds by name (addon-framework v1.2.0
// does not compare spec hashes there), so a cluster not yet released keeps rendering its old
// config, which still exists under its old name.
func (s *suite) scenarioProgressiveRollout(t *testing.T) {
	ctx := ctxFor(t)
	s.setPlacement(t, "cluster1", "cluster2")
	old := s.issuedTo("cluster1")
	cert := s.waitClientCert(t, "cluster1", old...)
	bl, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bl[pki.Fingerprint(cert)]; ok {
		t.Errorf("cluster1 came back, but its new certificate %s is on the blocklist", pki.Fingerprint(cert))
	}
	s.waitAgentObjects(t, "cluster1")
	s.waitAgentRunning(t, "cluster1")
	s.waitReady(t, 2, 2)

	// First the strategy alone (no config change), so the image changes are rolled out under it.
	// The soak time (minSuccessTime) holds the second cluster back for some seconds after the
	// first one's rollout began: without it the stand-in agent is available so soon that OCM
	// released the second cluster about a second after the first, and a manager pass delayed
	// by a busy machine wrote no status in between to show the skew.
	s.patchSpec(t, func(a *v1alpha1.ArgoCDAgentAddonSpec) {
		a.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{
			Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1),
				RolloutConfig: clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: rolloutSoak}}},
		}
	})
	s.eventually(t, "hub: ClusterManagementAddOn entry has rolloutStrategy Progressive", time.Minute, func(ctx context.Context) (bool, string) {
		cma := &addonv1alpha1.ClusterManagementAddOn{}
		if err := s.hub.Get(ctx, client.ObjectKey{Name: addonName}, cma); err != nil {
			return false, err.Error()
		}
		for _, p := range cma.Spec.InstallStrategy.Placements {
			if p.Name == placement && p.RolloutStrategy.Type == clusterv1alpha1.Progressive {
				return true, ""
			}
		}
		return false, fmt.Sprintf("placements %+v", cma.Spec.InstallStrategy.Placements)
	})

	// A rollback to the previous argocd-agent release and the upgrade back, each a change of
	// the agents' image tag under the strategy.
	s.rollAgentsTo(t, s.previousAgentImage)
	s.rollAgentsTo(t, s.agentImage)
}

// rolloutSoak is the agents' rollout's minSuccessTime in scenario 3.
const rolloutSoak = 8 * time.Second

// rollAgentsTo sets the GitOpsCluster's agent image to newImage and follows OCM's rollout of it
// over cluster1 and cluster2 under maxConcurrency 1: the clusters' agent Deployments must take
// the new image tag one after the other, each after OCM released it, and the GitOpsCluster
// must count the clusters not yet moved in status.agentsOnOtherVersion meanwhile (0 at the end).
func (s *suite) rollAgentsTo(t *testing.T, newImage string) {
	t.Helper()
	ctx := ctxFor(t)
	// The AddOnDeploymentConfig's spec hash each cluster's ManagedClusterAddOn wants now.
	oldHash := map[string]string{}
	for _, c := range []string{"cluster1", "cluster2"} {
		m, err := s.mca(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if oldHash[c] = desiredADCHash(m); oldHash[c] == "" {
			t.Fatalf("%s: ManagedClusterAddOn has no desired AddOnDeploymentConfig: %+v", c, m.Status.ConfigReferences)
		}
	}

	start := time.Now()
	s.patchSpec(t, func(a *v1alpha1.ArgoCDAgentAddonSpec) { a.Image = newImage })

	// Watch the hub's ManagedClusterAddOns (OCM's rollout decisions) and both managed clusters'
	// Deployments every 50ms until both Deployments carry the new image and both clusters have
	// completed. Each event keeps the poll round it was first seen in, so events are ordered
	// even when they are closer together than the clock's resolution matters.
	type seen struct {
		desired, image, completed int // poll round, 0 = not yet
		otherOld                  bool
	}
	// The most agents the GitOpsCluster counted on another version than its image's, and the
	// poll round it first counted that many in.
	var mostBehind, mostBehindRound int
	got := map[string]*seen{"cluster1": {}, "cluster2": {}}
	var timeline []string
	note := func(format string, args ...any) {
		timeline = append(timeline, fmt.Sprintf("%+7.2fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	deadline := start.Add(3 * time.Minute)
	done := func() bool {
		for _, st := range got {
			if st.image == 0 || st.completed == 0 {
				return false
			}
		}
		return true
	}
	for round := 1; !done(); round++ {
		if err := s.f.Err(); err != nil {
			t.Fatalf("a fleet process died during the rollout: %v\n%s", err, s.hint())
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout of %s did not complete on both clusters within 3m; timeline:\n  %s\n%s", newImage, strings.Join(timeline, "\n  "), s.hint())
		}
		for _, c := range []string{"cluster1", "cluster2"} {
			st := got[c]
			m, err := s.mca(ctx, c)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if h := desiredADCHash(m); st.desired == 0 && h != oldHash[c] {
				st.desired = round
				note("%s: OCM sets the new AddOnDeploymentConfig as desired (hub)", c)
			}
			if st.desired != 0 && st.completed == 0 && progressingCompleted(m) {
				st.completed = round
				note("%s: ManagedClusterAddOn Progressing=Completed, rollout succeeded there (hub)", c)
			}
		}
		if g, err := s.goc(ctx); err == nil && g.Status.AgentsOnOtherVersion > int32(mostBehind) {
			mostBehind, mostBehindRound = int(g.Status.AgentsOnOtherVersion), round
			note("hub: status.agentsOnOtherVersion %d", mostBehind)
		}
		images := map[string]string{}
		for _, c := range []string{"cluster1", "cluster2"} {
			d, err := s.agentDeployment(ctx, c)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			images[c] = containerImage(d, addon.AgentContainerName)
		}
		for _, c := range []string{"cluster1", "cluster2"} {
			if images[c] != newImage || got[c].image != 0 {
				continue
			}
			other := otherCluster(c)
			got[c].image = round
			got[c].otherOld = images[other] != newImage
			note("%s: Deployment has the new image (%s: %s)", c, other, images[other])
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("progressive rollout of %s, timeline:\n  %s", newImage, strings.Join(timeline, "\n  "))
	first, second := "cluster1", "cluster2"
	if got[second].desired < got[first].desired {
		first, second = second, first
	}
	// maxConcurrency 1: OCM releases the second cluster only once the first runs the new
	// config and is available, which its new pod becomes some seconds after the round this
	// loop sees the new image; with rolloutStrategy All both would be released at once, before
	// either is applied. The hub's Progressing=Completed is not the bound: OCM may release the
	// next cluster between this loop's reads of the two ManagedClusterAddOns.
	if got[second].desired <= got[first].image {
		t.Errorf("OCM released %s (round %d) before %s ran the new config and was available (round %d): not one cluster at a time",
			second, got[second].desired, first, got[first].image)
	}
	if got[second].image < got[second].desired || got[second].image <= got[first].image || !got[first].otherOld {
		t.Errorf("%s's Deployment got the new image in round %d, before OCM released it (round %d; %s updated in round %d): "+
			"the clusters did not receive the new configuration one after another",
			second, got[second].image, got[second].desired, first, got[first].image)
	} else {
		t.Logf("spokes updated one after the other: %s in round %d, %s in round %d, after its release in round %d",
			first, got[first].image, second, got[second].image, got[second].desired)
	}
	for _, c := range []string{"cluster1", "cluster2"} {
		d, err := s.agentDeployment(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if img := containerImage(d, addon.ReloaderContainerName); img != s.reloaderImg {
			t.Errorf("%s: cert-reloader image changed to %q", c, img)
		}
		s.waitAgentRunning(t, c)
	}
	s.waitReady(t, 2, 2)
	// Before OCM released the second cluster, at least that one ran the other release; the
	// count is the hub's view of the version skew that argocd-agent's handshake refuses.
	if mostBehind == 0 || mostBehindRound > got[second].desired {
		t.Errorf("status.agentsOnOtherVersion never counted %s as behind before its release (most %d, in round %d; released in round %d)",
			second, mostBehind, mostBehindRound, got[second].desired)
	}
	if g, err := s.goc(ctx); err != nil {
		t.Error(err)
	} else if g.Status.AgentsOnOtherVersion != 0 {
		t.Errorf("status.agentsOnOtherVersion after the rollout: %d, want 0", g.Status.AgentsOnOtherVersion)
	}
}

func otherCluster(c string) string {
	if c == "cluster1" {
		return "cluster2"
	}
	return "cluster1"
}

// desiredADCHash is the spec hash of the AddOnDeploymentConfig OCM wants on the cluster.
func desiredADCHash(m *addonv1alpha1.ManagedClusterAddOn) string {
	for _, r := range m.Status.ConfigReferences {
		if r.Resource == "addondeploymentconfigs" && r.DesiredConfig != nil {
			return r.DesiredConfig.SpecHash
		}
	}
	return ""
}

func progressingCompleted(m *addonv1alpha1.ManagedClusterAddOn) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionProgressing)
	if c == nil || c.Reason != addonv1alpha1.ProgressingReasonCompleted {
		return false
	}
	for _, r := range m.Status.ConfigReferences {
		if r.DesiredConfig == nil || r.LastAppliedConfig == nil || r.DesiredConfig.SpecHash != r.LastAppliedConfig.SpecHash {
			return false
		}
	}
	return true
}

// patchSpec edits the GitOpsCluster's argoCDAgentAddon, as a user would.
func (s *suite) patchSpec(t *testing.T, edit func(*v1alpha1.ArgoCDAgentAddonSpec)) {
	t.Helper()
	ctx := ctxFor(t)
	g, err := s.goc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(g.DeepCopy())
	edit(&g.Spec.ArgoCDAgentAddon)
	if err := s.hub.Patch(ctx, g, patch); err != nil {
		t.Fatalf("editing GitOpsCluster %s/%s: %v", ns, gocName, err)
	}
}

// Scenario 6: deleting the GitOpsCluster.
func (s *suite) scenarioDeletion(t *testing.T) {
	ctx := ctxFor(t)
	g, err := s.goc(ctx)
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	for _, c := range []string{"cluster1", "cluster2"} {
		cert, _, err := s.clientCert(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		current[c] = pki.Fingerprint(cert)
	}
	if err := s.hub.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	s.waitHubObject(t, "GitOpsCluster", &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: gocName}}, false)
	s.waitHubObject(t, "ClusterManagementAddOn", &addonv1alpha1.ClusterManagementAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonName}}, false)
	s.waitHubObject(t, "AddOnTemplate", &addonv1alpha1.AddOnTemplate{ObjectMeta: metav1.ObjectMeta{Name: "argocd-agent-" + ns + "-" + gocName}}, false)
	s.eventually(t, "hub: no AddOnDeploymentConfig left", time.Minute, func(ctx context.Context) (bool, string) {
		var adcs addonv1alpha1.AddOnDeploymentConfigList
		if err := s.hub.List(ctx, &adcs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		return len(adcs.Items) == 0, fmt.Sprintf("%d left", len(adcs.Items))
	})
	for _, c := range []string{"cluster1", "cluster2"} {
		s.waitHubObject(t, "Argo CD cluster secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cluster-" + c}}, false)
		s.waitHubObject(t, "ManagedClusterAddOn (removed by OCM)", &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: addonName}}, false)
	}
	s.eventually(t, "hub: no addon ManifestWork left in the cluster namespaces", time.Minute, func(ctx context.Context) (bool, string) {
		var left []string
		for _, c := range []string{"cluster1", "cluster2"} {
			list := &workv1.ManifestWorkList{}
			if err := s.hub.List(ctx, list, client.InNamespace(c)); err != nil {
				return false, err.Error()
			}
			for _, w := range list.Items {
				if strings.Contains(w.Name, addonName) {
					left = append(left, c+"/"+w.Name)
				}
			}
		}
		return len(left) == 0, fmt.Sprintf("%v", left)
	})
	for _, c := range []string{"cluster1", "cluster2"} {
		s.waitAgentObjectsGone(t, c)
		s.eventually(t, c+": client certificate secret removed by OCM's registration agent", time.Minute,
			func(ctx context.Context) (bool, string) {
				err := s.spokes[c].Get(ctx, client.ObjectKey{Namespace: agentNS, Name: clientCertSecret}, &corev1.Secret{})
				return apierrors.IsNotFound(err), getState(err, "secret")
			})
	}
	// The agents that were cut off are blocked on the principal too.
	bl, err := s.blocklist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for c, fp := range current {
		if _, ok := bl[fp]; !ok {
			t.Errorf("%s's last certificate %s is not on the blocklist after the GitOpsCluster's deletion", c, fp)
		}
	}
	// What the user owns, and what the fleet set up, stays.
	for _, o := range []struct {
		what string
		obj  client.Object
	}{
		{"Placement", &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: placement}}},
		{"ManagedClusterSet", &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: s.f.ClusterSet()}}},
		{"ManagedClusterSetBinding", &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.f.ClusterSet()}}},
		{"principal Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"}}},
		{"hub CA (the hub PKI stays, as documented)", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-ca"}}},
	} {
		if err := s.hub.Get(ctx, client.ObjectKeyFromObject(o.obj), o.obj); err != nil {
			t.Errorf("hub: %s %s should remain: %v", o.what, client.ObjectKeyFromObject(o.obj), err)
		}
	}
	for _, c := range []string{"cluster1", "cluster2"} {
		if err := s.spokes[c].Get(ctx, client.ObjectKey{Name: agentNS}, &corev1.Namespace{}); err != nil {
			t.Errorf("%s: namespace %s should stay (orphaned: it is Argo CD's): %v", c, agentNS, err)
		}
	}
}

func ownedByAppliedManifestWork(o metav1.Object) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == "AppliedManifestWork" {
			return true
		}
	}
	return false
}

func mapsKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func describeCSRs(csrs []certificatesv1.CertificateSigningRequest) string {
	var out []string
	for i := range csrs {
		out = append(out, describeCSR(&csrs[i]))
	}
	return strings.Join(out, "; ")
}
