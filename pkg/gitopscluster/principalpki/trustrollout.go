package principalpki

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pki"
)

// trustRolloutRecheck is how soon a reconcile looks again while the principal waits for its
// agents to trust a new serving certificate. ManagedClusterAddOn and AddOnTemplate changes
// wake the reconcile anyway; this is a safety net.
const trustRolloutRecheck = time.Minute

// trustRollout is how far a principal's agents are from trusting new serving-certificate
// anchors.
type trustRollout struct {
	// counted agents are those whose addon is Available and last applied an AddOnTemplate of
	// a GitOpsCluster of this principal; pending ones among them have not applied a template
	// whose bundle holds the anchors.
	counted, pending int
	// staleTemplates are AddOnTemplates of the principal not yet written with the anchors.
	// They hold the switch only through the agents that applied them: a template no
	// Available agent runs (its GitOpsCluster stopped before writing it, say) cuts nobody.
	staleTemplates []string
}

func (t trustRollout) done() bool { return t.pending == 0 }

func (t trustRollout) String() string {
	msg := fmt.Sprintf("%d of %d available agent(s) have applied the trust bundle that verifies it", t.counted-t.pending, t.counted)
	if len(t.staleTemplates) > 0 {
		msg += fmt.Sprintf("; AddOnTemplate(s) %s do not carry it yet", ownership.Summarize(t.staleTemplates))
	}
	return msg
}

// agentsTrust reports whether the agents of principal namespace ns have received anchors. The
// bundle travels in each GitOpsCluster's AddOnTemplate and OCM rolls it out under the user's
// rollout strategy; OCM records, per cluster, the spec hash of the template it last applied
// (status.configReferences). An agent counts only while its addon is Available: one that is
// unavailable cannot connect with either certificate, gets the current template when it comes
// back, and must not hold the principal on its old certificate for ever; nor does a revoked
// one. Everything is read from the cache: the GitOpsClusters, their templates, the
// AgentRevocations of every served namespace and this addon's ManagedClusterAddOns.
func (k *Keeper) agentsTrust(ctx context.Context, ns string, anchors []*x509.Certificate) (trustRollout, error) {
	var out trustRollout
	var gocs v1alpha1.GitOpsClusterList
	if err := k.Client.List(ctx, &gocs); err != nil {
		return out, err
	}
	// A revoked cluster cannot connect with either certificate: it holds nothing. An
	// AgentRevocation in any principal namespace the manager serves holds on every principal.
	// A GitOpsCluster's spec.revokedClusters counts only through the AgentRevocations the
	// manager makes from it for clusters that GitOpsCluster owns: read from the spec, any
	// GitOpsCluster naming this principal could end the rollout for agents it does not own.
	revoked := sets.New[string]()
	var revs v1alpha1.AgentRevocationList
	if err := k.Client.List(ctx, &revs); err != nil {
		return out, err
	}
	for i := range revs.Items {
		if k.Config.NamespaceManaged(revs.Items[i].Namespace) {
			revoked.Insert(revs.Items[i].Name)
		}
	}
	// The spec hash of each of the principal's templates that carries the anchors ("" when it
	// does not yet).
	hashes := map[string]string{}
	for i := range gocs.Items {
		g := &gocs.Items[i]
		if !g.DeletionTimestamp.IsZero() || names.PrincipalNamespace(g) != ns {
			continue
		}
		name := names.TemplateName(g)
		hashes[name] = ""
		tmpl := &addonv1alpha1.AddOnTemplate{}
		if err := k.Client.Get(ctx, client.ObjectKey{Name: name}, tmpl); err != nil {
			// Not written yet: agents that ran an earlier one of that name are pending.
			if client.IgnoreNotFound(err) != nil {
				return out, err
			}
			continue
		}
		if !bundleHolds(addon.TemplateCABundle(tmpl), anchors) {
			// Agents that applied it are pending.
			out.staleTemplates = append(out.staleTemplates, tmpl.Name)
			continue
		}
		h, err := addon.ConfigSpecHash(tmpl)
		if err != nil {
			return out, err
		}
		hashes[tmpl.Name] = h
	}
	if len(hashes) == 0 {
		return out, nil
	}
	var mcas addonv1alpha1.ManagedClusterAddOnList
	if err := k.Client.List(ctx, &mcas, client.UnsafeDisableDeepCopy); err != nil {
		return out, err
	}
	for i := range mcas.Items {
		mca := &mcas.Items[i]
		if mca.Name != k.Config.AddonName || revoked.Has(mca.Namespace) ||
			!meta.IsStatusConditionTrue(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable) {
			continue
		}
		for _, ref := range mca.Status.ConfigReferences {
			if ref.Resource != addon.ResourceAddOnTemplates || ref.LastAppliedConfig == nil {
				continue
			}
			want, ours := hashes[ref.LastAppliedConfig.Name]
			if !ours {
				continue
			}
			out.counted++
			if want == "" || ref.LastAppliedConfig.SpecHash != want {
				out.pending++
			}
		}
	}
	return out, nil
}

// bundleHolds reports whether every anchor is in the PEM bundle.
func bundleHolds(bundle []byte, anchors []*x509.Certificate) bool {
	certs, err := pki.ParseCertificates(bundle)
	if err != nil {
		return false
	}
	have := sets.New[string]()
	for _, c := range certs {
		have.Insert(pki.Fingerprint(c))
	}
	for _, a := range anchors {
		if !have.Has(pki.Fingerprint(a)) {
			return false
		}
	}
	return true
}

// verifiedBy reports whether the leaf of chainPEM (with the rest of the chain as
// intermediates) verifies against anchors for serving.
func verifiedBy(chainPEM []byte, anchors []*x509.Certificate, now time.Time) bool {
	chain, err := pki.ParseCertificates(chainPEM)
	if err != nil || len(anchors) == 0 {
		return false
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, a := range anchors {
		roots.AddCert(a)
	}
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

// servingSwitch decides whether the principal may move from the serving certificate it has
// (served, nil on a first install) to one that verifies against newAnchors. It may when the
// agents that trust the served certificate also trust the new one (a renewal under the same
// anchor), when every agent counted by agentsTrust has the new anchors, or when the served
// certificate has expired (it verifies for nobody then; out.Notice says so). Otherwise it
// records the wait in out and returns false.
func (k *Keeper) servingSwitch(ctx context.Context, ns string, served *corev1.Secret, newAnchors []*x509.Certificate, now time.Time, out *PKI) (bool, error) {
	if served == nil {
		return true, nil
	}
	leaf, err := pki.ParseCertificates(served.Data[corev1.TLSCertKey])
	if err != nil {
		return true, nil
	}
	if oldAnchors, err := pki.ParseCertificates(served.Data["ca.crt"]); err == nil && bundleHolds(pki.EncodeCertificates(oldAnchors...), newAnchors) {
		return true, nil
	}
	rollout, err := k.agentsTrust(ctx, ns, newAnchors)
	if err != nil {
		return false, err
	}
	if rollout.done() {
		return true, nil
	}
	if !now.Before(leaf[0].NotAfter) {
		out.Notice = fmt.Sprintf("the principal's serving certificate expired on %s before the agents trusted its successor (%s); it was replaced anyway", leaf[0].NotAfter.UTC().Format(time.RFC3339), rollout)
		return true, nil
	}
	out.Waiting = fmt.Sprintf("the principal keeps its serving certificate (valid until %s) until the agents trust the new one's CA: %s", leaf[0].NotAfter.UTC().Format(time.RFC3339), rollout)
	out.RenewBy(now.Add(trustRolloutRecheck))
	out.RenewBy(leaf[0].NotAfter)
	return false, nil
}
