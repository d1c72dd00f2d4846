// Package status prints a fleet's state as the hub sees it: each GitOpsCluster, its clusters,
// whether their agents are available, the agent image OCM last applied on each and the Argo CD
// release that agent is built against, the certificates the principal's ledger holds for each,
// and why anything is not ready. It only reads, with the rights of whoever runs it.
package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ledger"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// Options say what to print.
type Options struct {
	// Namespace limits the GitOpsClusters to one namespace; "" means all.
	Namespace string
	// AddonName is the agents' ClusterManagementAddOn (the manager's --addon-name).
	AddonName string
	// MaxClusters caps the cluster rows per GitOpsCluster (the counts still cover all); 0 means no cap.
	MaxClusters int
	// Now is the clock for certificate expiry.
	Now time.Time
}

// Print writes the state of the GitOpsClusters to w.
func Print(ctx context.Context, r client.Reader, w io.Writer, opts Options) error {
	var list v1alpha1.GitOpsClusterList
	if err := r.List(ctx, &list, client.InNamespace(opts.Namespace)); err != nil {
		return fmt.Errorf("listing GitOpsClusters: %w", err)
	}
	if len(list.Items) == 0 {
		_, err := fmt.Fprintln(w, "No GitOpsClusters.")
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].Namespace+"/"+list.Items[i].Name < list.Items[j].Namespace+"/"+list.Items[j].Name
	})
	for i := range list.Items {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := printOne(ctx, r, w, &list.Items[i], opts); err != nil {
			return err
		}
	}
	return nil
}

func printOne(ctx context.Context, r client.Reader, w io.Writer, goc *v1alpha1.GitOpsCluster, opts Options) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GITOPSCLUSTER\tMODE\tPLACEMENT\tSELECTED\tAVAILABLE\tREADY\tREASON")
	ready, reason := "Unknown", ""
	if c := meta.FindStatusCondition(goc.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		ready, reason = string(c.Status), c.Reason
	}
	mode := string(goc.Spec.ArgoCDAgentAddon.Mode)
	if mode == "" {
		mode = string(v1alpha1.AgentModeManaged)
	}
	fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%d\t%s\t%s\n", goc.Namespace, goc.Name, mode, goc.Spec.PlacementRef.Name,
		goc.Status.SelectedClusters, goc.Status.AvailableAgents, ready, reason)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range goc.Status.Conditions {
		if troubled(c) {
			fmt.Fprintf(w, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	if p := goc.Status.Principal; p != nil {
		fmt.Fprintf(w, "  principal %s:%d (%s), namespace %s\n", p.Address, p.Port, p.Source, names.PrincipalNamespace(goc))
	}
	if line, err := versions(ctx, r, goc); err != nil {
		return err
	} else if line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}

	selected, err := ownership.SelectedClusters(ctx, r, goc.Namespace, goc.Spec.PlacementRef.Name)
	if err != nil {
		return fmt.Errorf("reading the decisions of Placement %s/%s: %w", goc.Namespace, goc.Spec.PlacementRef.Name, err)
	}
	clusters := sets.List(selected)
	shown := clusters
	if opts.MaxClusters > 0 && len(shown) > opts.MaxClusters {
		shown = shown[:opts.MaxClusters]
	}
	why := map[string]string{}
	for _, u := range goc.Status.UnavailableClusters {
		why[u.Name] = strings.TrimSpace(u.Reason + " " + u.Message)
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tAGENT\tAGENT IMAGE\tBUILT AGAINST\tCERTIFICATES\tNOT READY BECAUSE")
	for _, c := range shown {
		agent, image, err := agentState(ctx, r, goc, c, opts.AddonName)
		if err != nil {
			return err
		}
		certs, err := certificates(ctx, r, names.PrincipalNamespace(goc), c, opts.Now)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", c, agent, image, builtAgainst(image), certs, why[c])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(shown) < len(clusters) {
		fmt.Fprintf(w, "  ... and %d more clusters (--max-clusters)\n", len(clusters)-len(shown))
	}
	return nil
}

// versions describes the releases the GitOpsCluster's current AddOnDeploymentConfig runs: the
// agent's, the Argo CD it is built against, and the Argo CD components it installs (or that the
// clusters keep their own). Only a config the GitOpsCluster controls is read; "" when there is none.
func versions(ctx context.Context, r client.Reader, goc *v1alpha1.GitOpsCluster) (string, error) {
	name := goc.Status.AddOnDeploymentConfig
	if name == "" {
		return "", nil
	}
	adc := &addonv1alpha1.AddOnDeploymentConfig{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: name}, adc); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading AddOnDeploymentConfig %s/%s: %w", goc.Namespace, name, err)
	}
	if !metav1.IsControlledBy(adc, goc) {
		return "", nil
	}
	vars := map[string]string{}
	for _, v := range adc.Spec.CustomizedVariables {
		vars[v.Name] = v.Value
	}
	return describeVersions(vars[addon.VarAgentImage], vars[addon.VarArgoCDImage]), nil
}

// describeVersions says which supported pair an agent image is, and whether the Argo CD
// components installed beside it (argoCDImage, "" when the clusters keep their own) are its pair.
func describeVersions(agentImage, argoCDImage string) string {
	if agentImage == "" {
		return ""
	}
	pair, known := version.PairOfImage(agentImage)
	var b strings.Builder
	if known {
		fmt.Fprintf(&b, "argocd-agent %s, built against Argo CD %s", pair.Agent, pair.ArgoCD)
	} else {
		fmt.Fprintf(&b, "argocd-agent %s is not a supported release (%s)", displayTag(agentImage), supported())
	}
	switch components := version.ImageTag(argoCDImage); {
	case argoCDImage == "":
		b.WriteString("; Argo CD: the clusters' own")
	case known && components != pair.ArgoCD:
		fmt.Fprintf(&b, "; Argo CD components %s, not the agent's pair", displayTag(argoCDImage))
	default:
		fmt.Fprintf(&b, "; Argo CD components %s", displayTag(argoCDImage))
	}
	return b.String()
}

// builtAgainst is the Argo CD release a cluster's agent image is built against.
func builtAgainst(image string) string {
	if image == "-" {
		return "-"
	}
	if pair, ok := version.PairOfImage(image); ok {
		return "Argo CD " + pair.ArgoCD
	}
	return "unsupported release"
}

// displayTag is an image's tag, or the image itself when it has none (a digest).
func displayTag(image string) string {
	if tag := version.ImageTag(image); tag != "" {
		return tag
	}
	return image
}

// supported lists the supported pairs.
func supported() string {
	var out []string
	for _, p := range version.Pairs() {
		out = append(out, p.Agent+" with Argo CD "+p.ArgoCD)
	}
	return "supported: " + strings.Join(out, ", ")
}

// agentState is the agent addon's Available condition on the cluster and the agent image of
// the AddOnDeploymentConfig OCM last applied there. The ManagedClusterAddOn's status is
// writable by the managed cluster's own identity, so the config it names is read only when it
// is one of this GitOpsCluster's (its namespace, controlled by it): a cluster cannot make the
// command show another tenant's config, or a made-up image, as its own.
func agentState(ctx context.Context, r client.Reader, goc *v1alpha1.GitOpsCluster, cluster, addonName string) (string, string, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: cluster, Name: addonName}, mca); err != nil {
		if apierrors.IsNotFound(err) {
			return "not installed", "-", nil
		}
		return "", "", fmt.Errorf("reading ManagedClusterAddOn %s/%s: %w", cluster, addonName, err)
	}
	state := "Unknown"
	if c := meta.FindStatusCondition(mca.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable); c != nil {
		state = "Available=" + string(c.Status)
	}
	image := "-"
	for _, ref := range mca.Status.ConfigReferences {
		if ref.Resource != "addondeploymentconfigs" || ref.LastAppliedConfig == nil || ref.LastAppliedConfig.Namespace != goc.Namespace {
			continue
		}
		adc := &addonv1alpha1.AddOnDeploymentConfig{}
		err := r.Get(ctx, types.NamespacedName{Namespace: ref.LastAppliedConfig.Namespace, Name: ref.LastAppliedConfig.Name}, adc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("reading AddOnDeploymentConfig %s/%s: %w", ref.LastAppliedConfig.Namespace, ref.LastAppliedConfig.Name, err)
		}
		if !metav1.IsControlledBy(adc, goc) {
			continue
		}
		for _, v := range adc.Spec.CustomizedVariables {
			if v.Name == addon.VarAgentImage {
				image = v.Value
			}
		}
	}
	return state, image, nil
}

// certificates summarizes the unexpired certificates the principal's ledger records for the
// cluster (its agent certificates and its cluster secret's resource-proxy certificate).
func certificates(ctx context.Context, r client.Reader, principalNS, cluster string, now time.Time) (string, error) {
	_, entries, err := ledger.Store{Reader: r, Namespace: principalNS}.Read(ctx, cluster, now)
	if apierrors.IsForbidden(err) {
		return "not readable", nil
	}
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "none", nil
	}
	var soonest, latest time.Time
	for _, t := range entries {
		if soonest.IsZero() || t.Before(soonest) {
			soonest = t
		}
		if t.After(latest) {
			latest = t
		}
	}
	return fmt.Sprintf("%d, expiring %s to %s", len(entries), soonest.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339)), nil
}

// troubled reports whether a condition says something needs attention: True for the
// conditions that name a problem, anything but True for the others.
func troubled(c metav1.Condition) bool {
	switch c.Type {
	case v1alpha1.ConditionRevocationPaused, v1alpha1.ConditionForeignArgoCD:
		return c.Status != metav1.ConditionFalse
	}
	return c.Status != metav1.ConditionTrue
}
