package addonobjects

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/names"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/ownership"
)

// With userIDs: Auto the components of a cluster that reports OpenShift leave the user IDs to
// the platform (its restricted-v2 security context constraint refuses pods that ask for a UID
// outside the namespace's range), and everywhere else run as Argo CD's images expect. The
// report is OCM's reserved ClusterClaim product.open-cluster-management.io, which a cluster's
// own agents write (Red Hat ACM sets it): it is trusted only to choose between the two for
// that cluster's own pods, the same pods with fewer fields, never more rights and never
// anything of another cluster. A cluster that claims OpenShift falsely breaks only its own
// components (redis's image then runs as root, which runAsNonRoot refuses).
//
// The manager reads the claims through a Placement of its own that selects, among the clusters
// of the user's Placement's cluster sets, those with the claim (OCM's placement controller
// evaluates the claims and its decisions wake the GitOpsClusters like any other), and gives
// those clusters' components ManagedClusterAddOn the components template with the UIDs left
// out, a second template of the GitOpsCluster. While that Placement's decisions cannot be read
// as its whole selection (none yet, being deleted, mid-update), every cluster keeps what it
// has: a component restarted with UIDs OpenShift refuses would stop.

// openShiftProducts are the values of the product claim for OpenShift and the services built on
// it, as Red Hat ACM's cluster claims set them.
var openShiftProducts = []string{"OpenShift", "OpenShiftDedicated", "ROSA", "ARO", "ROKS"}

// productClaim is OCM's reserved ClusterClaim naming a cluster's product.
const productClaim = "product.open-cluster-management.io"

// autoUserIDs reports whether the GitOpsCluster lets each cluster's claim choose its
// components' user IDs.
func autoUserIDs(goc *v1alpha1.GitOpsCluster) bool {
	u := goc.Spec.ArgoCDAgentAddon.UserIDs
	return u == v1alpha1.UserIDsAuto || u == ""
}

// OpenShiftPlacementName is the name of the Placement (in the GitOpsCluster's namespace) that
// finds the clusters reporting OpenShift: "argocd-openshift-<name>", cut to a name's length
// with a hash of the GitOpsCluster when longer.
func OpenShiftPlacementName(goc *v1alpha1.GitOpsCluster) string {
	return cutName("argocd-openshift-"+goc.Name, goc.Namespace+"/"+goc.Name)
}

// AssignedTemplateName is the name of the GitOpsCluster's components template whose pods name
// no UID: its components template's name with "-uids" after it, cut like the others.
func AssignedTemplateName(goc *v1alpha1.GitOpsCluster) string {
	return cutName(names.ComponentsTemplateName(goc)+"-uids", goc.Namespace+"/"+goc.Name)
}

// cutName is name when it is short enough for an object name, else its start and a hash of key.
func cutName(name, key string) string {
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:])[:16]
	return strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-") + suffix
}

// openShiftPlacementSpec selects the clusters of the user's Placement's cluster sets whose
// product claim names OpenShift, whatever their taints: a cluster that goes unreachable must not
// read as one that stopped reporting OpenShift.
func openShiftPlacementSpec(user *clusterv1beta1.Placement) clusterv1beta1.PlacementSpec {
	return clusterv1beta1.PlacementSpec{
		ClusterSets: append([]string(nil), user.Spec.ClusterSets...),
		Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			ClaimSelector: clusterv1beta1.ClusterClaimSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: productClaim, Operator: metav1.LabelSelectorOpIn, Values: append([]string(nil), openShiftProducts...)}}},
		}}},
		Tolerations: []clusterv1beta1.Toleration{{Operator: clusterv1beta1.TolerationOpExists}},
	}
}

// openShiftClusters returns the clusters the GitOpsCluster's OpenShift Placement selects, and
// whether its decisions may be read as its whole selection; it writes that Placement (or, unless
// userIDs is Auto, deletes it) first. note says why it could not be used, for the condition.
func (comp Components) openShiftClusters(ctx context.Context, goc *v1alpha1.GitOpsCluster) (decided sets.Set[string], known bool, note string, err error) {
	name := OpenShiftPlacementName(goc)
	if !autoUserIDs(goc) {
		return nil, false, "", comp.DeleteOpenShiftPlacement(ctx, goc)
	}
	live := &clusterv1beta1.Placement{}
	switch err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: name}, live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, false, "", err
	case !names.HasLabels(live.Labels, names.OwnerLabels(goc)):
		return nil, false, fmt.Sprintf("; userIDs: Auto cannot tell the clusters that report OpenShift: the Placement %s/%s is not this GitOpsCluster's (rename it to let the manager create its own)", goc.Namespace, name), nil
	}
	user := &clusterv1beta1.Placement{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: goc.Spec.PlacementRef.Name}, user); err != nil {
		// Without the user's Placement nothing is selected; keep what there is.
		return nil, false, "", client.IgnoreNotFound(err)
	}
	spec := openShiftPlacementSpec(user)
	switch {
	case live == nil:
		pl := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: goc.Namespace, Name: name, Labels: names.OwnerLabels(goc)}, Spec: spec}
		if err := controllerutil.SetControllerReference(goc, pl, comp.Client.Scheme()); err != nil {
			return nil, false, "", err
		}
		return nil, false, "", comp.Client.Create(ctx, pl)
	// Only the fields set here: the API server defaults others.
	case !equality.Semantic.DeepEqual(live.Spec.ClusterSets, spec.ClusterSets) || !equality.Semantic.DeepEqual(live.Spec.Predicates, spec.Predicates) ||
		!equality.Semantic.DeepEqual(live.Spec.Tolerations, spec.Tolerations) || live.Spec.NumberOfClusters != nil:
		updated := live.DeepCopy()
		updated.Spec.ClusterSets, updated.Spec.Predicates, updated.Spec.Tolerations, updated.Spec.NumberOfClusters = spec.ClusterSets, spec.Predicates, spec.Tolerations, nil
		// Its decisions were for the old spec: unknown until OCM has decided again.
		return nil, false, "", comp.Client.Update(ctx, updated)
	}
	decided, pages, err := ownership.SelectedClustersAndPages(ctx, comp.Client, goc.Namespace, name)
	if err != nil {
		return nil, false, "", err
	}
	if ownership.SelectionUnknown(live, decided, pages) != "" {
		return nil, false, "", nil
	}
	return decided, true, "", nil
}

// assignedClusters are the clusters whose components leave the user IDs to the platform:
// under Auto those the OpenShift Placement selects, or, while its decisions cannot be read,
// those whose components addon already names a template with the UIDs left out. mcas are
// the components ManagedClusterAddOns.
func (comp Components) assignedClusters(ctx context.Context, goc *v1alpha1.GitOpsCluster, mcas []addonv1alpha1.ManagedClusterAddOn) (sets.Set[string], string, error) {
	decided, known, note, err := comp.openShiftClusters(ctx, goc)
	if err != nil || !autoUserIDs(goc) {
		return sets.New[string](), note, err
	}
	if known {
		return decided, note, nil
	}
	out := sets.New[string]()
	for i := range mcas {
		c := mcas[i].Namespace
		switch t := templateConfig(&mcas[i]); t {
		case "":
		case AssignedTemplateName(goc):
			out.Insert(c)
		case names.ComponentsClusterTemplateName(goc, c):
			live := &addonv1alpha1.AddOnTemplate{}
			if err := comp.Client.Get(ctx, types.NamespacedName{Name: t}, live); client.IgnoreNotFound(err) != nil {
				return nil, note, err
			}
			if live.Annotations[v1alpha1.AnnotationUserIDs] == string(v1alpha1.UserIDsAssigned) {
				out.Insert(c)
			}
		}
	}
	return out, note, nil
}

// DeleteOpenShiftPlacement deletes the GitOpsCluster's OpenShift Placement if it owns one.
func (comp Components) DeleteOpenShiftPlacement(ctx context.Context, goc *v1alpha1.GitOpsCluster) error {
	live := &clusterv1beta1.Placement{}
	if err := comp.Client.Get(ctx, types.NamespacedName{Namespace: goc.Namespace, Name: OpenShiftPlacementName(goc)}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !names.HasLabels(live.Labels, names.OwnerLabels(goc)) {
		return nil
	}
	pre := client.Preconditions{UID: &live.UID}
	return client.IgnoreNotFound(comp.Client.Delete(ctx, live, pre))
}
