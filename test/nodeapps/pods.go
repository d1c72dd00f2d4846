package nodeapps

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
)

// ClusterClient is the admin client of "hub" or of a managed cluster.
func ClusterClient(f *fleet.Fleet, cluster string) (client.Client, error) {
	if cluster == "hub" {
		return f.HubClient(), nil
	}
	return f.SpokeClient(cluster)
}

// PodReport describes the pods of a namespace: phase, container states and their reasons, for
// a failure message.
func PodReport(ctx context.Context, f *fleet.Fleet, cluster, namespace string) string {
	c, err := ClusterClient(f, cluster)
	if err != nil {
		return err.Error()
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  pod %s/%s %s:", cluster, p.Name, p.Status.Phase)
		for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, " %s waiting %s %s;", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, " %s terminated %s exit %d %s;", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
			default:
				fmt.Fprintf(&b, " %s running ready=%t restarts=%d;", s.Name, s.Ready, s.RestartCount)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// WritePodTable writes the pods of every namespace as `kubectl get pods -A -o wide` shows them,
// with each pod's container images instead of its IP; every line starts with indent.
func WritePodTable(ctx context.Context, c client.Client, w io.Writer, indent string) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return err
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := pods.Items[i], pods.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%sNAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tNODE\tIMAGE\n", indent)
	for i := range pods.Items {
		p := &pods.Items[i]
		ready, restarts := 0, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
			restarts += s.RestartCount
		}
		var images []string
		for _, ctr := range p.Spec.Containers {
			images = append(images, ctr.Image)
		}
		node := p.Spec.NodeName
		if node == "" {
			node = "<none>"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%d/%d\t%s\t%d\t%s\t%s\n", indent, p.Namespace, p.Name, ready, len(p.Spec.Containers),
			PodStatus(p), restarts, node, strings.Join(images, ","))
	}
	return tw.Flush()
}

// PodStatus is the STATUS column of `kubectl get pods`: the reason a container waits or
// ended with (ImagePullBackOff, CrashLoopBackOff, Init:0/1...) before the pod's phase.
func PodStatus(p *corev1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	for i, s := range p.Status.InitContainerStatuses {
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			continue
		case s.State.Terminated != nil && s.State.Terminated.Reason != "":
			return "Init:" + s.State.Terminated.Reason
		case s.State.Terminated != nil:
			return fmt.Sprintf("Init:ExitCode:%d", s.State.Terminated.ExitCode)
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			return "Init:" + s.State.Waiting.Reason
		default:
			return fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
	}
	running := false
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		s := p.Status.ContainerStatuses[i]
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			reason = s.State.Waiting.Reason
		case s.State.Terminated != nil && s.State.Terminated.Reason != "":
			reason = s.State.Terminated.Reason
		case s.State.Terminated != nil:
			reason = fmt.Sprintf("ExitCode:%d", s.State.Terminated.ExitCode)
		case s.Ready && s.State.Running != nil:
			running = true
		}
	}
	if reason == "Completed" && running {
		reason = string(corev1.PodRunning)
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}
