package manager

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

// upgradeHint says how to bring the CRDs up to date: Helm installs a chart's CRDs only on a
// first install.
const upgradeHint = "helm upgrade does not update CRDs: apply them from the chart of this version, " +
	"kubectl apply --server-side -f charts/argocd-agent-addon/crds/"

// CheckCRDs returns an error when the hub serves none of one of the project's kinds (the
// manager could not start its caches), and warnings for CRDs whose revision is older than this
// build needs (AnnotationCRDRevision), or that cannot be read.
func CheckCRDs(ctx context.Context, mapper meta.RESTMapper, reader client.Reader) (warnings []string, err error) {
	for kind, plural := range projectKinds {
		if _, err := mapper.RESTMapping(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), v1alpha1.GroupVersion.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("the hub serves no %s (%s.%s/%s): the installed CRDs are older than this manager; %s",
					kind, plural, v1alpha1.GroupVersion.Group, v1alpha1.GroupVersion.Version, upgradeHint)
			}
			return nil, fmt.Errorf("looking up %s: %w", kind, err)
		}
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		name := plural + "." + v1alpha1.GroupVersion.Group
		if err := reader.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			warnings = append(warnings, fmt.Sprintf("cannot read CRD %s to check its revision: %v", name, err))
			continue
		}
		if rev, _ := strconv.Atoi(crd.GetAnnotations()[v1alpha1.AnnotationCRDRevision]); rev < v1alpha1.CRDRevision {
			warnings = append(warnings, fmt.Sprintf("CRD %s is at revision %d, older than the %d this manager needs: new fields and validation are missing; %s",
				name, rev, v1alpha1.CRDRevision, upgradeHint))
		}
	}
	return warnings, nil
}
