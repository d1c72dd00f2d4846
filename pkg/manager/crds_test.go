package manager_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/finalizers"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestCRDsOlderThanTheManagerAreReported: CRDs left behind by helm upgrade (which never updates
// them) are reported at start: an older revision as a warning, a missing kind as an error that
// stops the manager with the command that fixes it, read from the CRD rather than from a mapper
// that may be stale; a CRD being deleted is a warning, since its objects may wait for the
// manager's finalizers.
func TestCRDsOlderThanTheManagerAreReported(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	check := func() ([]string, error) {
		t.Helper()
		mapper := freshMapper(t, env.Config)
		return manager.CheckCRDs(ctx, mapper, env.Client, true)
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

	// A revocation the manager has not lifted yet (it was stopped) keeps the CRD being deleted:
	// the manager must still start, to lift it and let the deletion end.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}); err != nil {
		t.Fatal(err)
	}
	held := &v1alpha1.AgentRevocation{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "c1", Finalizers: []string{v1alpha1.FinalizerRevocationLift}}}
	if err := env.Client.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	// A mapper that has mapped the kind before keeps mapping it after the CRD is gone.
	staleMapper := freshMapper(t, env.Config)
	if _, err := manager.CheckCRDs(ctx, staleMapper, env.Client, true); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the CRD is being deleted", 30*time.Second, func() error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return err
		}
		if got.DeletionTimestamp == nil {
			return fmt.Errorf("not marked for deletion")
		}
		return nil
	})
	warnings, err = check()
	if err != nil || !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, name) && strings.Contains(w, "being deleted") }) {
		t.Fatalf("a CRD being deleted while its objects wait for the manager: warnings %q, error %v", warnings, err)
	}

	// The CRD's deletion has deleted the revocation since it was created: read it again.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
		t.Fatal(err)
	}
	if err := finalizers.Remove(ctx, env.Client, held, v1alpha1.FinalizerRevocationLift); err != nil {
		t.Fatal(err)
	}
	// The CRD's own finalizer removes it once no object is left; the API server's pace, not the
	// product's.
	poll.Until(t, "the CRD is gone", 2*time.Minute, func() error {
		err := env.Client.Get(ctx, types.NamespacedName{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get: %v", err)
	})
	if _, err := manager.CheckCRDs(ctx, staleMapper, env.Client, true); err == nil || !strings.Contains(err.Error(), "AgentRevocation") || !strings.Contains(err.Error(), "kubectl apply") {
		t.Fatalf("a missing AgentRevocation CRD: error %v", err)
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

// TestAnotherProjectsGitOpsClusterCRDStopsTheManager: a hub where argocd-pull-integration's or
// Red Hat ACM's GitOpsCluster CRD holds the name (Helm then skips the chart's) stops the manager
// with an error that says so, rather than running against their schema.
func TestAnotherProjectsGitOpsClusterCRDStopsTheManager(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	const name = "gitopsclusters.apps.open-cluster-management.io"
	foreign := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "not this project's") || !strings.Contains(err.Error(), "argocd-pull-integration") {
			t.Fatalf("want an error naming the foreign CRD, got %v", err)
		}
	}

	// argocd-pull-integration's: v1alpha1, without this project's revision annotation.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(crd.DeepCopy())
	delete(crd.Annotations, v1alpha1.AnnotationCRDRevision)
	if err := env.Client.Patch(ctx, crd, patch); err != nil {
		t.Fatal(err)
	}
	_, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, true)
	foreign(t, err)

	// ACM's: v1beta1 only.
	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	acm := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: v1alpha1.GroupVersion.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gitopsclusters", Singular: "gitopscluster", Kind: "GitOpsCluster", ListKind: "GitOpsClusterList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1beta1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	// The old CRD goes at the API server's pace.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := env.Client.Create(ctx, acm)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating ACM's CRD: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err = manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, true)
	foreign(t, err)
}

// TestReportCRDJoinsTheChecks: with the pull model on, the MulticlusterApplicationSetReport CRD
// is checked as the project's others are: one of an older install (no revision annotation) is a
// warning that says how to update it, one that does not serve v1alpha1 stops the manager, and a
// missing one stops it too; with the pull model off, it is not looked at.
func TestReportCRDJoinsTheChecks(t *testing.T) {
	env := testenv.StartForTest(t, testenv.Options{WithoutOCM: true})
	ctx := context.Background()
	const name = "multiclusterapplicationsetreports.apps.open-cluster-management.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Annotations[v1alpha1.AnnotationCRDRevision] != strconv.Itoa(v1alpha1.CRDRevision) {
		t.Fatalf("the report CRD of this build is at revision %q, want %d", crd.Annotations[v1alpha1.AnnotationCRDRevision], v1alpha1.CRDRevision)
	}
	patch := client.MergeFrom(crd.DeepCopy())
	delete(crd.Annotations, v1alpha1.AnnotationCRDRevision)
	if err := env.Client.Patch(ctx, crd, patch); err != nil {
		t.Fatal(err)
	}
	warnings, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, true)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], name) || !strings.Contains(warnings[0], "kubectl apply") {
		t.Fatalf("an unmarked report CRD: warnings %q, error %v", warnings, err)
	}
	if warnings, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, false); err != nil || len(warnings) != 0 {
		t.Fatalf("the pull model off: warnings %q, error %v", warnings, err)
	}

	// One that serves another version only is another project's schema.
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(crd.DeepCopy())
	crd.Spec.Versions[0].Served = false
	if err := env.Client.Patch(ctx, crd, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, true); err == nil || !strings.Contains(err.Error(), "not this project's") || !strings.Contains(err.Error(), "Red Hat ACM") {
		t.Fatalf("a report CRD that does not serve v1alpha1: %v", err)
	}

	if err := env.Client.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "a missing report CRD stops the manager", 2*time.Minute, func() error {
		_, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, true)
		if err == nil || !strings.Contains(err.Error(), "MulticlusterApplicationSetReport") {
			return fmt.Errorf("error %v", err)
		}
		return nil
	})
	if _, err := manager.CheckCRDs(ctx, freshMapper(t, env.Config), env.Client, false); err != nil {
		t.Fatalf("the pull model off, no report CRD: %v", err)
	}
}
