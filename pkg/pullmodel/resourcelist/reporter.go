package resourcelist

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// FieldManager is the reporter's field manager on the Applications it annotates; OCM's work
// agent applies the rest of the Application server-side, so neither removes the other's fields.
const FieldManager = "argocd-resource-reporter"

// LabelReported ("true") marks a spoke Application the pull model delivered: the hub shows the
// objects it deploys (the hub Application's status.resources, its ApplicationSet's report), so
// the reporter lists them.
const LabelReported = "apps.open-cluster-management.io/report-resources"

// Reported reports whether the reporter annotates a spoke Application: one the pull model
// marked, or one of an ApplicationSet, which hubs marked alone before every delivered
// Application was.
func Reported(app *unstructured.Unstructured) bool {
	l := app.GetLabels()
	return l[LabelReported] == "true" || l[pullmodel.LabelApplicationSet] == "true"
}

// CacheOptions scope the reporter's cache to the Applications of namespace. A label selector
// cannot ask for either mark, so the cache holds every Application there, trimmed, and Reported
// chooses.
func CacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{pullmodel.NewApplication(): {Transform: TrimApplication}},
	}
}

// TrimApplication keeps of a cached Application what the reporter reads: its metadata (without
// managed fields) and the identity of each object in status.resources. An Application's
// status (history, conditions, every resource's sync and health) is most of its size, and
// the spoke's Argo CD rewrites it on every refresh.
func TrimApplication(obj any) (any, error) {
	app, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	app.SetManagedFields(nil)
	kept := map[string]any{"apiVersion": app.GetAPIVersion(), "kind": app.GetKind(), "metadata": app.Object["metadata"]}
	items, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	if len(items) > 0 {
		trimmed := make([]any, 0, len(items))
		for _, item := range items {
			m, ok := item.(map[string]any)
			if !ok {
				continue
			}
			r := map[string]any{}
			for _, k := range []string{"group", "version", "kind", "namespace", "name"} {
				if v, ok := m[k]; ok {
					r[k] = v
				}
			}
			trimmed = append(trimmed, r)
		}
		kept["status"] = map[string]any{"resources": trimmed}
	}
	app.Object = kept
	return app, nil
}

// Reporter keeps each reported Application's AnnotationResourceList equal to its
// status.resources. It runs on the managed cluster, next to its Argo CD, with the rights to read
// and patch Applications of one namespace and nothing else.
type Reporter struct {
	Client client.Client
}

// SetupWithManager registers the reporter; it reacts only to changes of an Application's
// resources or of the annotation (the spoke's Argo CD rewrites status on every refresh).
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("resource-reporter").
		For(pullmodel.NewApplication(), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool {
				app, ok := e.Object.(*unstructured.Unstructured)
				return !ok || Reported(app)
			},
			UpdateFunc: func(e event.UpdateEvent) bool {
				app, ok := e.ObjectNew.(*unstructured.Unstructured)
				return !ok || (Reported(app) && Wanted(app) != pullmodel.Annotation(app, pullmodel.AnnotationResourceList))
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(r)
}

// Wanted is the annotation value an Application should carry.
func Wanted(app *unstructured.Unstructured) string { return Encode(FromApplication(app)) }

// Reconcile writes the annotation when it differs, with a merge patch of that key alone.
func (r *Reporter) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := pullmodel.NewApplication()
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if app.GetDeletionTimestamp() != nil || !Reported(app) {
		return ctrl.Result{}, nil
	}
	want := Wanted(app)
	have, present := pullmodel.LookupAnnotation(app, pullmodel.AnnotationResourceList)
	if want == have && (want != "" || !present) {
		return ctrl.Result{}, nil
	}
	var value any = want
	if want == "" {
		value = nil // removes the key
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pullmodel.AnnotationResourceList: value}}})
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
}

// NewManager builds the reporter's manager for the resource-reporter command: its cache holds
// the Applications of namespace only (trimmed), no metrics endpoint, health probes on
// healthAddr ("0" disables them).
func NewManager(cfg *rest.Config, namespace, healthAddr string) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 runtime.NewScheme(),
		Cache:                  CacheOptions(namespace),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: healthAddr,
	})
	if err != nil {
		return nil, err
	}
	if healthAddr != "0" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	if err := (&Reporter{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}
