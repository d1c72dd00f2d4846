package propagation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	if pullmodel.IsTrue(app.GetAnnotations()[pullmodel.AnnotationSkipReconcile]) {
		return nil
	}
	return &Refusal{ReasonMissingSkipReconcile, fmt.Sprintf("annotation %s: \"true\" is missing; without it the hub's Argo CD would deploy this Application too. Add it and the Application is delivered to cluster %s",
		pullmodel.AnnotationSkipReconcile, pullmodel.TargetCluster(app))}
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
