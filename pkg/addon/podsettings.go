package addon

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
)

// PodSettings place the pods of a template and size their containers. OCM's template
// decorators for an AddOnDeploymentConfig's nodePlacement and resourceRequirements reach
// Deployments' and DaemonSets' containers only, not a StatefulSet (Argo CD's
// application-controller) nor init containers, so the manager writes them into the template.
type PodSettings struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Resources apply in order; a later match wins.
	Resources []ContainerResources
}

// ContainerResources are the resources of the containers named Container ("" or "*": all) of
// the workload named Workload ("*": all).
type ContainerResources struct {
	Workload, Container string
	Resources           corev1.ResourceRequirements
}

// Empty reports whether the settings change nothing.
func (p PodSettings) Empty() bool {
	return len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && len(p.Resources) == 0
}

var podTemplateKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// ApplyPodSettings writes p into every workload of manifests, in place. Manifests of other
// kinds, and all of them when p is empty, keep their bytes.
func ApplyPodSettings(manifests []workv1.Manifest, p PodSettings) error {
	if p.Empty() {
		return nil
	}
	for i := range manifests {
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(manifests[i].Raw); err != nil {
			return err
		}
		if !podTemplateKinds[o.GetKind()] {
			continue
		}
		if err := applyTo(o, p); err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		manifests[i].Raw = raw
	}
	return nil
}

func applyTo(o *unstructured.Unstructured, p PodSettings) error {
	spec, _, err := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if err != nil || spec == nil {
		return fmt.Errorf("no pod template: %v", err)
	}
	if len(p.NodeSelector) > 0 {
		sel, _ := spec["nodeSelector"].(map[string]any)
		if sel == nil {
			sel = map[string]any{}
		}
		for k, v := range p.NodeSelector {
			sel[k] = v
		}
		spec["nodeSelector"] = sel
	}
	if len(p.Tolerations) > 0 {
		list, _ := spec["tolerations"].([]any)
		for _, t := range p.Tolerations {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t)
			if err != nil {
				return err
			}
			list = append(list, u)
		}
		spec["tolerations"] = list
	}
	for _, field := range []string{"initContainers", "containers"} {
		list, _ := spec[field].([]any)
		for _, c := range list {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			for _, r := range p.Resources {
				if r.Workload != "*" && r.Workload != o.GetName() || r.Container != "" && r.Container != "*" && r.Container != m["name"] {
					continue
				}
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r.Resources)
				if err != nil {
					return err
				}
				m["resources"] = u
			}
		}
	}
	return unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
}
