package nodeapps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fleet"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// InstallResourceReporter is the documented step of a cluster admin (docs/pull-model.md): the
// manifests `argocd-agent-addon resource-reporter manifests` prints (bin is the project's
// binary), applied to cluster's namespace; it returns once the reporter's pod is ready, with
// the uninstall that deletes what it created (also after a failed install).
func InstallResourceReporter(ctx context.Context, f *fleet.Fleet, cluster, bin, image, namespace string) (uninstall func(context.Context) error, err error) {
	uninstall = func(context.Context) error { return nil }
	out, err := exec.CommandContext(ctx, bin, "resource-reporter", "manifests", "--image", image, "--namespace", namespace).Output()
	if err != nil {
		return uninstall, fmt.Errorf("resource-reporter manifests: %w", err)
	}
	c, err := ClusterClient(f, cluster)
	if err != nil {
		return uninstall, err
	}
	var created []client.Object
	uninstall = func(ctx context.Context) error {
		var errs []error
		for i := len(created) - 1; i >= 0; i-- {
			errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, created[i], client.PropagationPolicy(metav1.DeletePropagationBackground))))
		}
		return errors.Join(errs...)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return uninstall, err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, u); err != nil {
			return uninstall, fmt.Errorf("%s: creating %s %s: %w", cluster, u.GetKind(), u.GetName(), err)
		}
		created = append(created, u)
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: resourcelist.Name}}
	if err := poll.Wait(ctx, 3*time.Minute, func(ctx context.Context) (bool, string) { return fleet.WorkloadReady(ctx, c, d) }); err != nil {
		return uninstall, fmt.Errorf("%s: the resource reporter's pod: %w\n%s", cluster, err, PodReport(ctx, f, cluster, namespace))
	}
	return uninstall, nil
}
