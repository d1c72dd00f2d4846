package nodeapps

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// AgentWaitsForItsImage reports whether the agent pod in namespace runs its cert-reloader while
// the argocd-agent container waits for image, which the cluster cannot pull (the agents'
// default image, which no registry here serves), with the pods' report as its state. A pull
// error for another image (a template that names the wrong one) is not waiting for its image.
func AgentWaitsForItsImage(ctx context.Context, f *fleet.Fleet, cluster, namespace, image string) (bool, string) {
	c, err := ClusterClient(f, cluster)
	if err != nil {
		return false, err.Error()
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{addon.LabelComponent: "agent"}); err != nil {
		return false, err.Error()
	}
	if len(pods.Items) != 1 {
		return false, fmt.Sprintf("%d agent pods", len(pods.Items))
	}
	pod := &pods.Items[0]
	for _, ctr := range pod.Spec.Containers {
		if ctr.Name == addon.AgentContainerName && ctr.Image != image {
			return false, fmt.Sprintf("the agent container's image is %q, want %q", ctr.Image, image)
		}
	}
	var reloaderRuns, agentWaits bool
	for _, st := range pod.Status.ContainerStatuses {
		switch st.Name {
		case addon.ReloaderContainerName:
			reloaderRuns = st.State.Running != nil
		case addon.AgentContainerName:
			w := st.State.Waiting
			agentWaits = w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") && strings.Contains(w.Message, image)
		}
	}
	return reloaderRuns && agentWaits, PodReport(ctx, f, cluster, namespace)
}

// ServicesReachPods reports whether every Service of namespace with the labels (all Services
// when nil) that selects pods has a ready endpoint, leaving out the agent's (its pods may wait
// for an image); it returns the Services it checked, and as its state those without one.
func ServicesReachPods(ctx context.Context, f *fleet.Fleet, cluster, namespace string, labels map[string]string) (ok bool, checked []string, state string) {
	c, err := ClusterClient(f, cluster)
	if err != nil {
		return false, nil, err.Error()
	}
	services := &corev1.ServiceList{}
	if err := c.List(ctx, services, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return false, nil, err.Error()
	}
	var empty []string
	for _, svc := range services.Items {
		if svc.Spec.Selector == nil || svc.Spec.Selector[addon.LabelName] == addon.AgentName {
			continue
		}
		checked = append(checked, svc.Name)
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return false, checked, err.Error()
		}
		ready := 0
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		if ready == 0 {
			empty = append(empty, fmt.Sprintf("%s (selector %v)", svc.Name, svc.Spec.Selector))
		}
	}
	return len(empty) == 0 && len(checked) > 0, checked, fmt.Sprintf("no ready endpoint: %v\n%s", empty, PodReport(ctx, f, cluster, namespace))
}
