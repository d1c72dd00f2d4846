package propagation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// Reasons a marked Application is not delivered; each is the first word of the delivery
// condition's message and the reason of its Event.
const (
	ReasonMissingCluster       = "MissingCluster"
	ReasonMissingSkipReconcile = "MissingSkipReconcile"
	ReasonUnknownCluster       = "UnknownCluster"
	ReasonClusterNotAccepted   = "ClusterNotAccepted"
	ReasonTooLarge             = "TooLarge"
	ReasonInvalid              = "InvalidApplication"
	ReasonHubItself            = "HubItself"
)

// Refusal is why an Application is not delivered, with a message a person can act on.
type Refusal struct {
	Reason  string
	Message string
}

func (r *Refusal) String() string { return r.Reason + ": " + r.Message }

// checkClusterNamed refuses an Application labelled for the pull model that names no cluster.
func checkClusterNamed(app *unstructured.Unstructured) *Refusal {
	if pullmodel.TargetCluster(app) != "" {
		return nil
	}
	return &Refusal{ReasonMissingCluster, fmt.Sprintf("label %s is set but annotation %s names no managed cluster; add it (an ApplicationSet template sets it to '{{name}}')",
		pullmodel.LabelPull, pullmodel.AnnotationCluster)}
}

// checkSkipReconcile refuses an Application the hub's own Argo CD would also reconcile: both
// would deploy it, the hub's to wherever its destination points.
func checkSkipReconcile(app *unstructured.Unstructured) *Refusal {
	if pullmodel.IsTrue(pullmodel.Annotation(app, pullmodel.AnnotationSkipReconcile)) {
		return nil
	}
	return &Refusal{ReasonMissingSkipReconcile, fmt.Sprintf("annotation %s: \"true\" is missing; without it the hub's Argo CD would deploy this Application too. Add it and the Application is delivered to cluster %s",
		pullmodel.AnnotationSkipReconcile, pullmodel.TargetCluster(app))}
}

// LocalClusterName and LocalClusterLabel mark the ManagedCluster that is the hub itself, as
// Red Hat ACM and OCM's cluster-manager register it ("local-cluster", labelled
// local-cluster: "true").
const (
	LocalClusterName  = "local-cluster"
	LocalClusterLabel = "local-cluster"
)

// IsHubItself reports whether a ManagedCluster is the hub itself. Its own registration agent
// may write the label, but that only ever stops deliveries to itself.
func IsHubItself(c *clusterv1.ManagedCluster) bool {
	return c != nil && (c.Name == LocalClusterName || pullmodel.IsTrue(c.Labels[LocalClusterLabel]))
}

// checkHubItself refuses to deliver an Application of the hub Argo CD namespace to the hub
// itself: it would land in the same namespace under the same name, so the work agent would write
// it over the hub Application it came from (taking away skip-reconcile and the pull label). An
// Application of another namespace lands as "<namespace>.<name>" and is delivered; the hub's
// Argo CD then deploys it, as it would any Application of its namespace.
func checkHubItself(p Policy, app *unstructured.Unstructured, cluster *clusterv1.ManagedCluster) *Refusal {
	if !IsHubItself(cluster) || SpokePlace(p, app) != (types.NamespacedName{Namespace: app.GetNamespace(), Name: app.GetName()}) {
		return nil
	}
	return &Refusal{ReasonHubItself, fmt.Sprintf("managed cluster %q is the hub itself, and the Application would be delivered onto itself (%s/%s); to deploy to the hub, remove the pull label and %s and let the hub's Argo CD deploy it, or leave %s out of the Placement",
		cluster.Name, app.GetNamespace(), app.GetName(), pullmodel.AnnotationSkipReconcile, cluster.Name)}
}

// checkCluster refuses an Application whose cluster is not a ManagedCluster the hub accepted
// (cluster is nil when it does not exist).
func checkCluster(app *unstructured.Unstructured, cluster *clusterv1.ManagedCluster) *Refusal {
	name := pullmodel.TargetCluster(app)
	if cluster == nil {
		return &Refusal{ReasonUnknownCluster, fmt.Sprintf("managed cluster %q (annotation %s) does not exist on this hub; fix the annotation or register the cluster", name, pullmodel.AnnotationCluster)}
	}
	if !cluster.Spec.HubAcceptsClient {
		return &Refusal{ReasonClusterNotAccepted, fmt.Sprintf("managed cluster %q is not accepted by the hub (spec.hubAcceptsClient is false); accept it and the Application is delivered", name)}
	}
	return nil
}
