package manager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestCRDsOlderThanTheManagerAreReported: CRDs left behind by helm upgrade (which never updates
// them) are reported at start: an older revision as a warning, a missing kind as an error that
// stops the manager with the command that fixes it.
func TestCRDsOlderThanTheManagerAreReported(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	check := func() ([]string, error) {
		t.Helper()
		mapper := freshMapper(t, env.Config)
		return manager.CheckCRDs(ctx, mapper, env.Client)
	}
	if warnings, err := check(); err != nil || len(warnings) > 0 {
		t.Fatalf("the CRDs of this build: warnings %q, error %v", warnings, err)
	}

	const name = "agentrevocations.apps.open-cluster-management.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(crd.DeepCopy())
	crd.Annotations[v1alpha1.AnnotationCRDRevision] = "1"
	if err := env.Client.Patch(ctx, crd, patch); err != nil {
		t.Fatal(err)
	}
	warnings, err := check()
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], name) || !strings.Contains(warnings[0], "kubectl apply") {
		t.Fatalf("an older CRD: warnings %q, error %v", warnings, err)
	}

	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := check()
		if err != nil && strings.Contains(err.Error(), "AgentRevocation") && strings.Contains(err.Error(), "kubectl apply") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a missing AgentRevocation CRD: error %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freshMapper(t *testing.T, cfg *rest.Config) meta.RESTMapper {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
