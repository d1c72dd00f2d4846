package manager

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

// projectKinds are the kinds whose CRDs the chart ships, by plural resource name.
var projectKinds = map[string]string{
	"GitOpsCluster":             "gitopsclusters",
	"ArgoCDClusterRegistration": "argocdclusterregistrations",
	"AgentRevocation":           "agentrevocations",
	reportKind:                  "multiclusterapplicationsetreports",
}

// upgradeHint says how to bring the CRDs up to date: Helm installs a chart's CRDs only on a
// first install.
const upgradeHint = "helm upgrade does not update CRDs: apply them from the chart of this version, " +
	"kubectl apply --server-side -f charts/argocd-agent-addon/crds/"

// foreignHint names the other projects that define a GitOpsCluster CRD of the same name.
const foreignHint = "argocd-pull-integration (v1alpha1) and Red Hat ACM's multicloud-integrations (v1beta1) define " +
	"gitopsclusters.apps.open-cluster-management.io too; only one of them can be installed on a hub (docs/install.md, " +
	"\"A hub with another GitOpsCluster CRD\")"

// reportKind is the pull model's report. Its CRD carries the revision annotation since
// revision 3; an older install of the chart left it without one, so an unmarked CRD of that
// name is reported rather than refused (Red Hat ACM's multicloud-integrations defines the same
// name).
const reportKind = "MulticlusterApplicationSetReport"

// CheckCRDs returns an error when one of the project's kinds is not served by this project's
// CRD (none at all, or one of another project of the same name: the manager never runs against
// a foreign schema), and warnings for CRDs whose revision is older than this build needs
// (AnnotationCRDRevision), or that cannot be read. With pullModel, the pull model's report
// kind is checked too.
func CheckCRDs(ctx context.Context, mapper meta.RESTMapper, reader client.Reader, pullModel bool) (warnings []string, err error) {
	for _, kind := range checkedKinds(pullModel) {
		name := crdName(kind)
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		readErr := reader.Get(ctx, types.NamespacedName{Name: name}, crd)
		// The CRD decides, not discovery: the mapper may still map a kind whose CRD is gone.
		if apierrors.IsNotFound(readErr) {
			return nil, missingKind(kind, name)
		}
		// A CRD being deleted is still served (without create) until its objects are gone, and
		// some of them wait for the manager's finalizers: refusing to start would hold it forever.
		if readErr == nil && crd.GetDeletionTimestamp() != nil {
			warnings = append(warnings, fmt.Sprintf("CRD %s is being deleted: the manager runs to release the %s objects its finalizers hold; the API server stops serving the kind once they are gone, and the manager then refuses to start until the CRD is applied again (%s)",
				name, kind, "kubectl apply --server-side -f charts/argocd-agent-addon/crds/"))
		}
		if readErr == nil {
			rev, marked := crd.GetAnnotations()[v1alpha1.AnnotationCRDRevision]
			if !servesVersion(crd, v1alpha1.GroupVersion.Version) || (!marked && kind != reportKind) {
				hint := foreignHint
				if kind == reportKind {
					hint = "Red Hat ACM's multicloud-integrations defines it too; the pull model needs this project's, " + upgradeHint
				}
				return nil, fmt.Errorf("CRD %s is not this project's (it carries no %s annotation or does not serve %s): the manager will not run against another schema; %s",
					name, v1alpha1.AnnotationCRDRevision, v1alpha1.GroupVersion.Version, hint)
			}
			if !marked {
				warnings = append(warnings, fmt.Sprintf("CRD %s carries no %s annotation: it is an older install's, or Red Hat ACM's of the same name; the pull model writes its reports with this project's schema; %s",
					name, v1alpha1.AnnotationCRDRevision, upgradeHint))
				rev = strconv.Itoa(v1alpha1.CRDRevision)
			}
			if n, _ := strconv.Atoi(rev); n < v1alpha1.CRDRevision {
				warnings = append(warnings, fmt.Sprintf("CRD %s is at revision %s, older than the %d this manager needs: new fields and validation are missing; %s",
					name, rev, v1alpha1.CRDRevision, upgradeHint))
			}
		} else {
			warnings = append(warnings, fmt.Sprintf("cannot read CRD %s to check its revision: %v", name, readErr))
		}
		if _, err := mapper.RESTMapping(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), v1alpha1.GroupVersion.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return nil, missingKind(kind, name)
			}
			return nil, fmt.Errorf("looking up %s: %w", kind, err)
		}
	}
	return warnings, nil
}

func missingKind(kind, name string) error {
	return fmt.Errorf("the hub serves no %s (%s/%s): the installed CRDs are older than this manager; %s",
		kind, name, v1alpha1.GroupVersion.Version, upgradeHint)
}

// checkedKinds are the kinds whose CRDs CheckCRDs reads.
func checkedKinds(pullModel bool) []string {
	kinds := []string{"GitOpsCluster", "ArgoCDClusterRegistration", "AgentRevocation"}
	if pullModel {
		kinds = append(kinds, reportKind)
	}
	return kinds
}

func crdName(kind string) string { return projectKinds[kind] + "." + v1alpha1.GroupVersion.Group }

// CheckedCRDs are the names of the CRDs the manager reads at start (CheckCRDs), which its
// RBAC must let it get.
func CheckedCRDs(pullModel bool) []string {
	var out []string
	for _, kind := range checkedKinds(pullModel) {
		out = append(out, crdName(kind))
	}
	return out
}

// servesVersion reports whether the CRD serves version.
func servesVersion(crd *unstructured.Unstructured, version string) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == version && m["served"] == true {
			return true
		}
	}
	return false
}
