package gitopscluster_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/addonobjects"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("secret %s/%s: %v", ns, name, err)
	}
	return s
}

func waitSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	eventually(t, "secret "+ns+"/"+name, func() error {
		return k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
	})
	return s
}

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCertificates(s.Data["tls.crt"])
	if err != nil || len(certs) == 0 {
		t.Fatalf("secret %s: %v", s.Name, err)
	}
	return certs[0]
}

// managedClusterAddOn returns the cluster's addon, creating it as OCM would.
func managedClusterAddOn(t *testing.T, cluster string) *addonv1alpha1.ManagedClusterAddOn {
	t.Helper()
	ctx := context.Background()
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, mca); apierrors.IsNotFound(err) {
		mca = &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: addonName}}
		if err := k8s.Create(ctx, mca); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return mca
}

func setMCAAvailable(t *testing.T, cluster string, available bool) {
	t.Helper()
	ctx := context.Background()
	mca := managedClusterAddOn(t, cluster)
	s := metav1.ConditionFalse
	if available {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable, Status: s, Reason: "Test", Message: "set by the test"})
	if err := k8s.Status().Update(ctx, mca); err != nil {
		t.Fatal(err)
	}
}

func TestFleetBecomesReadyWithPKIAndAddOnObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "ready"
	createNamespace(t, ns)
	createManagedClusters(t, "rd-1", "rd-2")
	createPlacement(t, ns, "all")
	setDecisions(t, ns, "all", 1, "rd-1", "rd-2")
	// A principal Service with a load-balancer address and a principal Deployment whose image
	// the agents inherit.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.7"}, {Hostname: "principal.hub.example"}}
	if err := k8s.Status().Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	dep := principalDeployment(ns, "quay.io/argoprojlabs/argocd-agent:v0.9.0-principal-test")
	if err := k8s.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "all", func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.AgentNamespace = "argocd-agent"
		g.Spec.ArgoCDAgentAddon.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}
	})

	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	if p := g.Status.Principal; p == nil || p.Address != "principal.hub.example" || p.Port != 443 || p.Source != v1alpha1.PrincipalSourceLoadBalancer {
		t.Errorf("status.principal = %+v, want the load-balancer host name on 443", p)
	}
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAgentsAvailable, metav1.ConditionFalse, v1alpha1.ReasonAgentsUnavailable)

	// Hub PKI in argocd-agent's formats.
	ca := getSecret(t, ns, names.CASecretName)
	if ca.Type != corev1.SecretTypeTLS || len(ca.Data["tls.key"]) == 0 {
		t.Errorf("CA secret type %s", ca.Type)
	}
	caCert := leafOf(t, ca)
	if !caCert.IsCA {
		t.Errorf("CA certificate is not a CA")
	}
	principalTLS := getSecret(t, ns, names.PrincipalTLSSecretName)
	leaf := leafOf(t, principalTLS)
	for _, want := range []string{"principal.hub.example", "argocd-agent-principal", "argocd-agent-principal." + ns + ".svc"} {
		if !contains(leaf.DNSNames, want) {
			t.Errorf("principal certificate SANs %v lack %s", leaf.DNSNames, want)
		}
	}
	if err := pki.VerifyChain(leaf, []*x509.Certificate{caCert}, x509.ExtKeyUsageServerAuth, clock.Now()); err != nil {
		t.Errorf("principal certificate: %v", err)
	}
	if !contains(leafOf(t, getSecret(t, ns, names.ResourceProxySecretName)).DNSNames, "argocd-agent-resource-proxy") {
		t.Error("resource-proxy certificate lacks the Service name")
	}
	if err := pki.ValidateJWTSigningKey(getSecret(t, ns, names.JWTSecretName).Data["jwt.key"]); err != nil {
		t.Errorf("JWT key: %v", err)
	}

	// The principal was restarted to load its certificate.
	principalStamp(t, dep)

	// Addon objects: the ADC carries the shared values, the template the registration, the CMA
	// this GitOpsCluster's entry with its rollout strategy.
	adc := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: g.Status.AddOnDeploymentConfig}, adc); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range adc.Spec.CustomizedVariables {
		vars[v.Name] = v.Value
	}
	if vars["ARGOCD_AGENT_SERVER_ADDRESS"] != "principal.hub.example" || vars["ARGOCD_AGENT_SERVER_PORT"] != "443" ||
		vars["ARGOCD_AGENT_MODE"] != "managed" || vars["ARGOCD_AGENT_IMAGE"] != dep.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("ADC variables = %v", vars)
	}
	if adc.Spec.AgentInstallNamespace != "argocd-agent" {
		t.Errorf("agentInstallNamespace = %q", adc.Spec.AgentInstallNamespace)
	}
	if len(adc.OwnerReferences) != 1 || adc.OwnerReferences[0].Name != "fleet" {
		t.Errorf("ADC owner references = %v", adc.OwnerReferences)
	}
	tmpl := &addonv1alpha1.AddOnTemplate{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(g)}, tmpl); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Spec.Registration) != 1 || tmpl.Spec.Registration[0].CustomSigner == nil ||
		tmpl.Spec.Registration[0].CustomSigner.SignerName != "open-cluster-management.io/argocd-agent-addon" ||
		tmpl.Spec.Registration[0].CustomSigner.SigningCA.Name != addon.UnreadableSigningCAName {
		t.Errorf("registration = %+v", tmpl.Spec.Registration)
	}
	entry, ok := cmaEntries(t)[ns+"/all"]
	if !ok {
		t.Fatalf("CMA has no entry for %s/all", ns)
	}
	if entry.RolloutStrategy.Type != clusterv1alpha1.Progressive || entry.RolloutStrategy.Progressive == nil ||
		entry.RolloutStrategy.Progressive.MaxConcurrency.IntValue() != 1 {
		t.Errorf("rollout strategy = %+v", entry.RolloutStrategy)
	}

	// Agents report Available: the fleet is Ready.
	setMCAAvailable(t, "rd-1", true)
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAgentsAvailable, metav1.ConditionFalse, v1alpha1.ReasonAgentsUnavailable)
	setMCAAvailable(t, "rd-2", true)
	g = conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	if g.Status.AvailableAgents != 2 || g.Status.SelectedClusters != 2 || len(g.Status.UnavailableClusters) != 0 {
		t.Errorf("counts: selected %d available %d unavailable %v", g.Status.SelectedClusters, g.Status.AvailableAgents, g.Status.UnavailableClusters)
	}
	setMCAAvailable(t, "rd-2", false)
	g = conditionIs(t, ns, "fleet", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNotReady)
	if len(g.Status.UnavailableClusters) != 1 || g.Status.UnavailableClusters[0].Name != "rd-2" {
		t.Errorf("unavailableClusters = %+v", g.Status.UnavailableClusters)
	}
}

// principalStamp waits for and returns the principal Deployment's certificate stamp.
func principalStamp(t *testing.T, dep *appsv1.Deployment) string {
	t.Helper()
	var stamp string
	eventually(t, "principal pod template stamped", func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(dep), d); err != nil {
			return err
		}
		if stamp = d.Spec.Template.Annotations[v1alpha1.AnnotationPrincipalTLSHash]; stamp == "" {
			return fmt.Errorf("no %s annotation", v1alpha1.AnnotationPrincipalTLSHash)
		}
		return nil
	})
	return stamp
}

func principalDeployment(ns, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "principal"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "principal", Image: image}}},
			},
		},
	}
}

// principalWithGitOpsCluster creates in ns the principal Deployment and a GitOpsCluster "fleet"
// whose Placement "p" selects no cluster, and returns the Deployment.
func principalWithGitOpsCluster(t *testing.T, ns string, mutate ...func(*v1alpha1.GitOpsCluster)) *appsv1.Deployment {
	t.Helper()
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1)
	dep := principalDeployment(ns, "img:1")
	if err := k8s.Create(context.Background(), dep); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "p", mutate...)
	return dep
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestUserCAIsAdoptedNeverOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "user-ca"
	createNamespace(t, ns)
	createManagedClusters(t, "uc-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "uc-1")
	userCA, err := pki.NewCA("my-own-ca", 24*time.Hour*365, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CASecretName}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": userCA.CertPEM, "tls.key": userCA.KeyPEM}}
	if err := k8s.Create(ctx, caSecret); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "")

	after := getSecret(t, ns, names.CASecretName)
	if after.ResourceVersion != caSecret.ResourceVersion {
		t.Errorf("the user's CA secret was written (resourceVersion %s -> %s)", caSecret.ResourceVersion, after.ResourceVersion)
	}
	leaf := leafOf(t, waitSecret(t, ns, names.PrincipalTLSSecretName))
	if err := pki.VerifyChain(leaf, []*x509.Certificate{userCA.Cert}, x509.ExtKeyUsageServerAuth, clock.Now()); err != nil {
		t.Errorf("principal certificate is not signed by the user's CA: %v", err)
	}
	cs := waitSecret(t, ns, "cluster-uc-1")
	var cfg struct {
		TLSClientConfig struct{ CertData []byte } `json:"tlsClientConfig"`
	}
	if err := json.Unmarshal(cs.Data["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCertificates(cfg.TLSClientConfig.CertData)
	if err := pki.VerifyChain(certs[0], []*x509.Certificate{userCA.Cert}, x509.ExtKeyUsageClientAuth, clock.Now()); err != nil {
		t.Errorf("cluster secret certificate is not signed by the user's CA: %v", err)
	}
}

func TestSANChangeReissuesPrincipalCertificate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "san-change"
	dep := principalWithGitOpsCluster(t, ns, withAddress("old.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "")
	before := leafOf(t, waitSecret(t, ns, names.PrincipalTLSSecretName))
	stampBefore := principalStamp(t, dep)
	if !contains(before.DNSNames, "old.example.com") {
		t.Fatalf("SANs %v lack old.example.com", before.DNSNames)
	}
	caBefore := getSecret(t, ns, names.CASecretName).ResourceVersion

	g := getGOC(t, ns, "fleet")
	g.Spec.ArgoCDAgentAddon.PrincipalServerAddress = "203.0.113.9"
	if err := k8s.Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	eventually(t, "principal certificate re-issued for the new address", func() error {
		leaf := leafOf(t, getSecret(t, ns, names.PrincipalTLSSecretName))
		if len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "203.0.113.9" || contains(leaf.DNSNames, "old.example.com") {
			return fmt.Errorf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
		}
		if leaf.SerialNumber.Cmp(before.SerialNumber) == 0 {
			return fmt.Errorf("same certificate")
		}
		return nil
	})
	if caAfter := getSecret(t, ns, names.CASecretName).ResourceVersion; caAfter != caBefore {
		t.Error("a SAN change rewrote the CA")
	}
	// The principal reads its certificate only at start-up: the new one restarts it.
	eventually(t, "principal pod template re-stamped for the new certificate", func() error {
		if stamp := principalStamp(t, dep); stamp == stampBefore {
			return fmt.Errorf("pod-template stamp unchanged: %s", stamp)
		}
		return nil
	})
}

func TestNodePortDiscoveryAndMissingPrincipal(t *testing.T) {
	ctx := context.Background()
	ns := "nodeport"
	createNamespace(t, ns)
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1)
	createGitOpsCluster(t, ns, "fleet", "p")
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionPrincipalDiscovered, metav1.ConditionFalse, v1alpha1.ReasonPrincipalNotFound)
	if msg := findCond(g, v1alpha1.ConditionPrincipalDiscovered).Message; !strings.Contains(msg, "principalServerAddress") {
		t.Errorf("message does not tell the user what to do: %s", msg)
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hub-node-1"}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-agent-principal"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443}}}}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	g = conditionIs(t, ns, "fleet", v1alpha1.ConditionPrincipalDiscovered, metav1.ConditionTrue, v1alpha1.ReasonPrincipalFromService)
	if p := g.Status.Principal; p == nil || p.Address != "10.0.0.5" || p.Port != 30443 || p.Source != v1alpha1.PrincipalSourceNodePort {
		t.Errorf("status.principal = %+v", p)
	}
	if g.Spec.ArgoCDAgentAddon.PrincipalServerAddress != "" {
		t.Error("the spec was written")
	}
	// An ExternalIP appearing on the node is preferred and picked up from the Node event.
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.5"})
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ExternalIP preferred", func() error {
		if p := getGOC(t, ns, "fleet").Status.Principal; p == nil || p.Address != "198.51.100.5" {
			return fmt.Errorf("principal = %+v", p)
		}
		return nil
	})
}

func TestTwoGitOpsClustersShareTheCMAAndReportConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nsA, nsB := "share-a", "share-b"
	createNamespace(t, nsA)
	createNamespace(t, nsB)
	createManagedClusters(t, "tw-a", "tw-b", "tw-shared")
	createPlacement(t, nsA, "pa")
	setDecisions(t, nsA, "pa", 1, "tw-a")
	createPlacement(t, nsB, "pb")
	setDecisions(t, nsB, "pb", 1, "tw-b")
	createGitOpsCluster(t, nsA, "fleet-a", "pa", withAddress("a.example.com"))
	time.Sleep(1100 * time.Millisecond) // distinct creation timestamps make fleet-a the elder
	createGitOpsCluster(t, nsB, "fleet-b", "pb", withAddress("b.example.com"))
	conditionIs(t, nsA, "fleet-a", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	conditionIs(t, nsB, "fleet-b", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")

	entries := cmaEntries(t)
	entryA, okA := entries[nsA+"/pa"]
	if !okA {
		t.Fatalf("CMA entries %v lack %s/pa", entries, nsA)
	}
	if _, ok := entries[nsB+"/pb"]; !ok {
		t.Fatalf("CMA entries lack %s/pb", nsB)
	}

	// A cluster selected by both is a conflict, reported on both with the other's name.
	setDecisions(t, nsA, "pa", 1, "tw-a", "tw-shared")
	setDecisions(t, nsB, "pb", 1, "tw-b", "tw-shared")
	ga := conditionIs(t, nsA, "fleet-a", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonClusterConflict)
	gb := conditionIs(t, nsB, "fleet-b", v1alpha1.ConditionAddOnConfigured, metav1.ConditionFalse, v1alpha1.ReasonClusterConflict)
	if m := findCond(ga, v1alpha1.ConditionAddOnConfigured).Message; !strings.Contains(m, "tw-shared") || !strings.Contains(m, nsB+"/fleet-b") {
		t.Errorf("fleet-a conflict message: %s", m)
	}
	if m := findCond(gb, v1alpha1.ConditionAddOnConfigured).Message; !strings.Contains(m, "tw-shared") || !strings.Contains(m, nsA+"/fleet-a") {
		t.Errorf("fleet-b conflict message: %s", m)
	}
	// The elder owns the shared cluster's registration; neither flaps.
	waitSecret(t, nsA, "cluster-tw-shared")
	rvA := getGOC(t, nsA, "fleet-a").ResourceVersion
	rvB := getGOC(t, nsB, "fleet-b").ResourceVersion
	time.Sleep(2 * time.Second)
	if getGOC(t, nsA, "fleet-a").ResourceVersion != rvA || getGOC(t, nsB, "fleet-b").ResourceVersion != rvB {
		t.Error("a conflicting GitOpsCluster's status keeps changing")
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: nsB, Name: "cluster-tw-shared"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the younger GitOpsCluster registered the shared cluster too: %v", err)
	}
	setDecisions(t, nsB, "pb", 1, "tw-b")
	conditionIs(t, nsB, "fleet-b", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")

	// Changing fleet-b leaves fleet-a's entry byte-for-byte intact; deleting fleet-b too.
	gb = getGOC(t, nsB, "fleet-b")
	gb.Spec.ArgoCDAgentAddon.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
		Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromString("50%")}}
	if err := k8s.Update(ctx, gb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fleet-b entry updated", func() error {
		if e := cmaEntries(t)[nsB+"/pb"]; e.RolloutStrategy.Type != clusterv1alpha1.Progressive {
			return fmt.Errorf("rollout %+v", e.RolloutStrategy)
		}
		return nil
	})
	if got := cmaEntries(t)[nsA+"/pa"]; !equality.Semantic.DeepEqual(got, entryA) {
		t.Errorf("fleet-a's entry changed: %+v -> %+v", entryA, got)
	}
	if err := k8s.Delete(ctx, gb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fleet-b gone with its entry", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(gb), &v1alpha1.GitOpsCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("GitOpsCluster still there: %v", err)
		}
		if _, ok := cmaEntries(t)[nsB+"/pb"]; ok {
			return fmt.Errorf("entry still there")
		}
		return nil
	})
	if got := cmaEntries(t)[nsA+"/pa"]; !equality.Semantic.DeepEqual(got, entryA) {
		t.Errorf("fleet-a's entry changed when fleet-b was deleted: %+v -> %+v", entryA, got)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(getGOC(t, nsA, "fleet-a"))}, &addonv1alpha1.AddOnTemplate{}); err != nil {
		t.Errorf("fleet-a's template: %v", err)
	}
}

func TestDeletionLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "deletion"
	createNamespace(t, ns)
	createManagedClusters(t, "dl-1", "dl-2")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "dl-1", "dl-2")
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users-own"}, StringData: map[string]string{"k": "v"}}
	if err := k8s.Create(ctx, userSecret); err != nil {
		t.Fatal(err)
	}
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"))
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	waitClusterSecrets(t, ns, "cluster-dl-1", "cluster-dl-2")
	g := getGOC(t, ns, "fleet")
	if !contains(g.Finalizers, v1alpha1.Finalizer) {
		t.Fatalf("finalizers = %v", g.Finalizers)
	}

	if err := k8s.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	eventually(t, "GitOpsCluster and its objects gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(g), &v1alpha1.GitOpsCluster{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("GitOpsCluster: %v", err)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: names.TemplateName(g)}, &addonv1alpha1.AddOnTemplate{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("template: %v", err)
		}
		var adcs addonv1alpha1.AddOnDeploymentConfigList
		if err := k8s.List(ctx, &adcs, client.InNamespace(ns)); err != nil || len(adcs.Items) > 0 {
			return fmt.Errorf("ADCs left: %d (%v)", len(adcs.Items), err)
		}
		if s := clusterSecrets(t, ns); s.Len() > 0 {
			return fmt.Errorf("cluster secrets %v", s.UnsortedList())
		}
		if _, ok := cmaEntries(t)[ns+"/p"]; ok {
			return fmt.Errorf("CMA entry")
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "p"}, &clusterv1beta1.Placement{}); err != nil {
		t.Errorf("the Placement was touched: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(userSecret), &corev1.Secret{}); err != nil {
		t.Errorf("the user's secret was touched: %v", err)
	}
	// The hub PKI stays: the principal still needs it.
	getSecret(t, ns, names.CASecretName)
}

func TestRestartCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "no-restart"
	dep := principalWithGitOpsCluster(t, ns, withAddress("p.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.RestartPrincipalOnCertificateChange = ptr.To(false)
	})
	conditionIs(t, ns, "fleet", v1alpha1.ConditionCertificatesReady, metav1.ConditionTrue, "")
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
		t.Fatal(err)
	}
	if d.ResourceVersion != dep.ResourceVersion {
		t.Errorf("the principal Deployment was written although restarts are off")
	}
}

// TestDeletingEveryGitOpsClusterRemovesTheCMA deletes the last GitOpsClusters at once: each
// removes its entry, the CMA goes with the last one, and no empty CMA is re-created.
func TestDeletingEveryGitOpsClusterRemovesTheCMA(t *testing.T) {
	ctx := context.Background()
	var all v1alpha1.GitOpsClusterList
	if err := k8s.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	for i := range all.Items {
		if err := k8s.Delete(ctx, &all.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	// Every GitOpsCluster the package's tests left is finalized at once here (tens of them, each
	// releasing its clusters, configs and PKI), on a machine that may be running fleets beside
	// this suite: the wait is for their number, not for one.
	poll.Until(t, "every GitOpsCluster finalized and the CMA gone", 2*time.Minute, func() error {
		var left v1alpha1.GitOpsClusterList
		if err := k8s.List(ctx, &left); err != nil {
			return err
		}
		if len(left.Items) > 0 {
			return fmt.Errorf("%d GitOpsCluster(s) left, e.g. %s/%s", len(left.Items), left.Items[0].Namespace, left.Items[0].Name)
		}
		if err := k8s.Get(ctx, types.NamespacedName{Name: addonName}, &addonv1alpha1.ClusterManagementAddOn{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("CMA still there: %v", err)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if err := k8s.Get(ctx, types.NamespacedName{Name: addonName}, &addonv1alpha1.ClusterManagementAddOn{}); !apierrors.IsNotFound(err) {
		t.Errorf("a CMA came back after the last GitOpsCluster was deleted: %v", err)
	}
}

// TestConfigChangeMakesANewConfigAndPrunesTheOldOneAfterTheRollout: a new image gives a new
// AddOnDeploymentConfig name; the old config stays while a cluster's ManagedClusterAddOn still
// wants it (a progressive rollout has not reached it) and goes once none does.
func TestConfigChangeMakesANewConfigAndPrunesTheOldOneAfterTheRollout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := "config-rollout"
	createNamespace(t, ns)
	createManagedClusters(t, "cr-1")
	createPlacement(t, ns, "p")
	setDecisions(t, ns, "p", 1, "cr-1")
	createGitOpsCluster(t, ns, "fleet", "p", withAddress("principal.example.com"), func(g *v1alpha1.GitOpsCluster) {
		g.Spec.ArgoCDAgentAddon.Image = "registry.example/agent:v1"
	})
	g := conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, "")
	oldName := g.Status.AddOnDeploymentConfig
	if !strings.HasPrefix(oldName, addonobjects.DeploymentConfigPrefix(g)) {
		t.Fatalf("ADC name %q lacks the prefix", oldName)
	}
	// cr-1's addon still wants the old config, as OCM records it before releasing the cluster.
	setMCAConfig(t, "cr-1", ns, oldName)

	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		g := getGOC(t, ns, "fleet")
		g.Spec.ArgoCDAgentAddon.Image = "registry.example/agent:v2"
		return k8s.Update(ctx, g)
	}); err != nil {
		t.Fatal(err)
	}
	var newName string
	eventually(t, "a new config referenced by the CMA", func() error {
		newName = getGOC(t, ns, "fleet").Status.AddOnDeploymentConfig
		if newName == oldName || newName == "" {
			return fmt.Errorf("config name still %q", newName)
		}
		e := cmaEntries(t)[ns+"/p"]
		for _, c := range e.Configs {
			if c.Resource == "addondeploymentconfigs" && c.Name == newName {
				return nil
			}
		}
		return fmt.Errorf("CMA entry configs %+v", e.Configs)
	})
	adc := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: oldName}, adc); err != nil {
		t.Fatalf("the old config was deleted while a cluster still wants it: %v", err)
	}
	// The rollout reaches cr-1: the old config goes.
	setMCAConfig(t, "cr-1", ns, newName)
	eventually(t, "old config pruned", func() error {
		err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: oldName}, &addonv1alpha1.AddOnDeploymentConfig{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("old config still there: %v", err)
		}
		return nil
	})
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: newName}, &addonv1alpha1.AddOnDeploymentConfig{}); err != nil {
		t.Errorf("the current config: %v", err)
	}
}

func setMCAConfig(t *testing.T, cluster, ns, adcName string) {
	t.Helper()
	ctx := context.Background()
	mca := managedClusterAddOn(t, cluster)
	ref := addonv1alpha1.ConfigReference{
		ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"},
		DesiredConfig:       &addonv1alpha1.ConfigSpecHash{ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: ns, Name: adcName}, SpecHash: "test"},
	}
	// OCM mirrors the desired config into the deprecated referent, which the API requires.
	ref.ConfigReferent = addonv1alpha1.ConfigReferent{Namespace: ns, Name: adcName}
	mca.Status.ConfigReferences = []addonv1alpha1.ConfigReference{ref}
	if err := k8s.Status().Update(ctx, mca); err != nil {
		t.Fatal(err)
	}
}
