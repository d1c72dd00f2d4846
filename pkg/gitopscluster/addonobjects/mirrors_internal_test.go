package addonobjects

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
)

// TestMirrorImageMovesAsOCMDoes: the rule OCM's addon-framework applies to Deployments'
// containers, which the StatefulSet and init containers must match.
func TestMirrorImageMovesAsOCMDoes(t *testing.T) {
	const image = "quay.io/argoproj/argocd:v3.4.3"
	m := func(source, mirror string) addonv1alpha1.ImageMirror {
		return addonv1alpha1.ImageMirror{Source: source, Mirror: mirror}
	}
	for name, c := range map[string]struct {
		registries []addonv1alpha1.ImageMirror
		want       string
	}{
		"none":                           {nil, image},
		"another source":                 {[]addonv1alpha1.ImageMirror{m("docker.io", "mirror.example.com")}, image},
		"the registry":                   {[]addonv1alpha1.ImageMirror{m("quay.io", "mirror.example.com")}, "mirror.example.com/argoproj/argocd:v3.4.3"},
		"trailing slashes":               {[]addonv1alpha1.ImageMirror{m("quay.io/", "mirror.example.com/")}, "mirror.example.com/argoproj/argocd:v3.4.3"},
		"the repository":                 {[]addonv1alpha1.ImageMirror{m(image, "mirror.example.com/argocd:v3.4.3")}, "mirror.example.com/argocd:v3.4.3"},
		"a plain prefix, not a path":     {[]addonv1alpha1.ImageMirror{m("quay.io/argo", "mirror.example.com/x")}, "mirror.example.com/xproj/argocd:v3.4.3"},
		"no source: the last segment":    {[]addonv1alpha1.ImageMirror{m("", "mirror.example.com/all")}, "mirror.example.com/all/argocd:v3.4.3"},
		"no source, no mirror":           {[]addonv1alpha1.ImageMirror{m("", "")}, "argocd:v3.4.3"},
		"the last that moves it wins":    {[]addonv1alpha1.ImageMirror{m("quay.io", "a.example.com"), m("quay.io/argoproj", "b.example.com"), m("docker.io", "c.example.com")}, "b.example.com/argocd:v3.4.3"},
		"each tried on the original":     {[]addonv1alpha1.ImageMirror{m("quay.io", "a.example.com"), m("a.example.com", "b.example.com")}, "a.example.com/argoproj/argocd:v3.4.3"},
		"a mirror under its source path": {[]addonv1alpha1.ImageMirror{m("quay.io/argoproj", "quay.io/argoproj-mirror")}, "quay.io/argoproj-mirror/argocd:v3.4.3"},
	} {
		if got := mirrorImage(c.registries, image); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

func sharedConfig(t *testing.T) (*v1alpha1.GitOpsCluster, *addonv1alpha1.AddOnDeploymentConfig) {
	t.Helper()
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fleet"}}
	adc, err := addon.BuildDeploymentConfig(addon.DeploymentConfigInput{Name: "x", Namespace: "ns", ServerAddress: "principal.example.com", ServerPort: 443,
		Mode: addon.ModeManaged, AgentImage: "ghcr.io/argoproj-labs/argocd-agent:v0.9.0", ReloaderImage: "registry.example.com/addon:v1",
		ArgoCDImage: "quay.io/argoproj/argocd:v3.4.3", RedisImage: "public.ecr.aws/docker/library/redis:8.2.3-alpine"})
	if err != nil {
		t.Fatal(err)
	}
	if adc.Name, err = deploymentConfigName(goc, &adc.Spec); err != nil {
		t.Fatal(err)
	}
	return goc, adc
}

// TestMirroredConfig: the images moved, each mapped onto itself so that OCM does not move a
// Deployment's a second time, everything else the GitOpsCluster's; none when nothing moves.
func TestMirroredConfig(t *testing.T) {
	goc, shared := sharedConfig(t)
	if adc, err := mirroredConfig(goc, shared, []addonv1alpha1.ImageMirror{{Source: "docker.io", Mirror: "mirror.example.com"}}); err != nil || adc != nil {
		t.Fatalf("mirrors that move nothing give %v (%v)", adc, err)
	}
	adc, err := mirroredConfig(goc, shared, []addonv1alpha1.ImageMirror{{Source: "quay.io/argoproj", Mirror: "quay.io/argoproj-mirror"}})
	if err != nil || adc == nil {
		t.Fatalf("%v (%v)", adc, err)
	}
	vars := map[string]string{}
	for _, v := range adc.Spec.CustomizedVariables {
		vars[v.Name] = v.Value
	}
	if vars[addon.VarArgoCDImage] != "quay.io/argoproj-mirror/argocd:v3.4.3" || vars[addon.VarRedisImage] != "public.ecr.aws/docker/library/redis:8.2.3-alpine" ||
		vars[addon.VarServerAddress] != "principal.example.com" || len(vars) != len(shared.Spec.CustomizedVariables) {
		t.Errorf("variables %v", vars)
	}
	for _, v := range vars {
		if got := mirrorImage(adc.Spec.Registries, v); got != v {
			t.Errorf("the config's registries move %q to %q", v, got)
		}
	}
	if adc.Spec.AgentInstallNamespace != shared.Spec.AgentInstallNamespace || adc.Namespace != shared.Namespace || !strings.HasPrefix(adc.Name, DeploymentConfigPrefix(goc)) || adc.Name == shared.Name {
		t.Errorf("config %s/%s installs into %q", adc.Namespace, adc.Name, adc.Spec.AgentInstallNamespace)
	}
	if adc.Labels[v1alpha1.LabelMirrorsOf] != configHash(goc, shared.Name) {
		t.Errorf("labels %v", adc.Labels)
	}
	if _, err := mirroredConfig(goc, shared, []addonv1alpha1.ImageMirror{{Source: "quay.io", Mirror: `mirror"x`}}); err == nil {
		t.Error("a mirror with a quote was accepted")
	}
}

func TestClusterMirrorsReadsOCMsAnnotation(t *testing.T) {
	mc := &clusterv1.ManagedCluster{}
	if clusterMirrors(mc) != nil {
		t.Error("mirrors without the annotation")
	}
	mc.Annotations = map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: `{"pullSecret":"ns.secret","registries":[{"mirror":"m.example.com","source":"quay.io"}]}`}
	if got := clusterMirrors(mc); len(got) != 1 || got[0].Mirror != "m.example.com" || got[0].Source != "quay.io" {
		t.Errorf("mirrors %v", got)
	}
	mc.Annotations[clusterv1.ClusterImageRegistriesAnnotationKey] = "{"
	if clusterMirrors(mc) != nil {
		t.Error("mirrors from an annotation that is not JSON")
	}
}

// TestMirroredConfigsReadOnlyTheOwnedClusters: a pass reads the ManagedClusters it owns, one by
// one, and never lists the fleet, so its cost follows its own clusters, not the hub's; the
// configs are those a list would give (a cluster owned but gone is skipped).
func TestMirroredConfigsReadOnlyTheOwnedClusters(t *testing.T) {
	goc, shared := sharedConfig(t)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clusterv1.Install, addonv1alpha1.Install, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	mirrored := map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: `{"registries":[{"source":"quay.io/argoproj","mirror":"mirror.example.com/argoproj"}]}`}
	var objs []client.Object
	for name, annotations := range map[string]map[string]string{"mirrored": mirrored, "plain": nil, "foreign-1": mirrored, "foreign-2": nil} {
		objs = append(objs, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}})
	}
	var listed []string
	read := sets.New[string]()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*clusterv1.ManagedCluster); ok {
				read.Insert(key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			listed = append(listed, fmt.Sprintf("%T", list))
			return c.List(ctx, list, opts...)
		},
	}).Build()
	w := &Writer{Hub: config.Hub{Client: c, Reader: c, Config: config.Default()}}
	owned := sets.New("mirrored", "plain", "gone")
	got, err := w.Components().mirroredConfigs(context.Background(), goc, shared, owned)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["mirrored"] == "" {
		t.Errorf("configs by cluster %v, want one for the mirrored cluster", got)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: shared.Namespace, Name: got["mirrored"]}, &addonv1alpha1.AddOnDeploymentConfig{}); err != nil {
		t.Errorf("the mirrored cluster's config: %v", err)
	}
	if !read.Equal(owned) {
		t.Errorf("ManagedClusters read %v, want only the owned %v", sets.List(read), sets.List(owned))
	}
	for _, l := range listed {
		if l == fmt.Sprintf("%T", &clusterv1.ManagedClusterList{}) {
			t.Errorf("the pass listed every ManagedCluster")
		}
	}
}
