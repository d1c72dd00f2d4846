package fleet

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplicationGVK is Argo CD's Application. The fleet handles Argo CD objects as unstructured:
// Argo CD's Go module needs a newer Go than this repository and pins other Kubernetes
// libraries.
var ApplicationGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Application"}

var appProjectGVK = ApplicationGVK.GroupVersion().WithKind("AppProject")

// NewApplication returns an Application in argoNamespace that deploys the directory path of
// repoURL's main branch to destNamespace of the cluster its Argo CD runs on, with automated
// sync (prune and self-heal) and the namespace created on sync.
func NewApplication(name, argoNamespace, repoURL, path, destNamespace string) *unstructured.Unstructured {
	app := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": argoNamespace},
		"spec": map[string]any{
			"project": "default",
			"source":  map[string]any{"repoURL": repoURL, "path": path, "targetRevision": "main"},
			"destination": map[string]any{
				"server":    "https://kubernetes.default.svc",
				"namespace": destNamespace,
			},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
	app.SetGroupVersionKind(ApplicationGVK)
	return app
}

// ApplicationState is what Argo CD reports in an Application's status.
type ApplicationState struct {
	// Sync is status.sync.status (Synced, OutOfSync, Unknown), Revision the commit it compared.
	Sync     string
	Revision string
	// Health is status.health.status (Healthy, Progressing, Degraded, Missing, ...).
	Health string
	// Operation is the last sync operation's phase and message (status.operationState).
	Operation        string
	OperationMessage string
	// Conditions are status.conditions as "type: message".
	Conditions []string
	// Resources are status.resources as "Kind namespace/name sync health".
	Resources []string
}

// String is a one-line summary for logs and test messages.
func (s ApplicationState) String() string {
	out := fmt.Sprintf("sync=%s health=%s revision=%.12s", orNone(s.Sync), orNone(s.Health), orNone(s.Revision))
	if s.Operation != "" {
		out += fmt.Sprintf(" operation=%s (%s)", s.Operation, s.OperationMessage)
	}
	if len(s.Conditions) > 0 {
		out += " conditions=[" + strings.Join(s.Conditions, "; ") + "]"
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// GetApplicationState reads an Application's status.
func GetApplicationState(ctx context.Context, c client.Client, namespace, name string) (ApplicationState, error) {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(ApplicationGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, app); err != nil {
		return ApplicationState{}, err
	}
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(app.Object, append([]string{"status"}, fields...)...)
		return v
	}
	s := ApplicationState{
		Sync:             str("sync", "status"),
		Revision:         str("sync", "revision"),
		Health:           str("health", "status"),
		Operation:        str("operationState", "phase"),
		OperationMessage: str("operationState", "message"),
	}
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			s.Conditions = append(s.Conditions, fmt.Sprintf("%v: %v", m["type"], m["message"]))
		}
	}
	res, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range res {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		health, _, _ := unstructured.NestedString(m, "health", "status")
		s.Resources = append(s.Resources, fmt.Sprintf("%v %v/%v %v %s", m["kind"], m["namespace"], m["name"], m["status"], orNone(health)))
	}
	return s, nil
}

// GuestbookFiles are the files of a guestbook-like application for a GitRepo: a Deployment
// and a ClusterIP Service named guestbook-ui, in directory guestbook/. Its pod is meant for the
// hello test image (test/node/images/hello): it serves port 8080 and is ready once the file it
// is given can be read (/etc/hostname, which the kubelet mounts into every container).
func GuestbookFiles(replicas int, image string) map[string]string {
	return map[string]string{
		"guestbook/guestbook-ui-deployment.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: guestbook-ui
spec:
  replicas: %d
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      app: guestbook-ui
  template:
    metadata:
      labels:
        app: guestbook-ui
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: guestbook-ui
        image: %s
        env:
        - {name: GREETING, value: guestbook-ui}
        - {name: SECRET_FILE, value: /etc/hostname}
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 2
`, replicas, image),
		"guestbook/guestbook-ui-svc.yaml": `apiVersion: v1
kind: Service
metadata:
  name: guestbook-ui
spec:
  ports:
  - port: 80
    targetPort: 8080
  selector:
    app: guestbook-ui
`,
	}
}
