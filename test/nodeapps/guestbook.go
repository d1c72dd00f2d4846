package nodeapps

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Guestbook names the guestbook's folder in its repository, the namespace it deploys to, and
// its Deployment, Service and ConfigMap.
const Guestbook = "guestbook"

// GuestbookApp is an Application in namespace (the components addon's Argo CD's) that
// deploys the guestbook folder of repoURL's main into namespace guestbook.
func GuestbookApp(namespace, repoURL string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": Guestbook, "namespace": namespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "targetRevision": "main", "path": Guestbook},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": Guestbook},
			"syncPolicy": map[string]any{
				"automated":   map[string]any{},
				"syncOptions": []any{"CreateNamespace=true"},
			},
		},
	}}
}

// GuestbookFiles is a small app whose pod runs the hello test image: ready only once its
// ConfigMap volume is mounted, behind a Service.
func GuestbookFiles(image string) map[string]string {
	return map[string]string{
		Guestbook + "/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: guestbook
data:
  greeting: hello from the guestbook
`,
		Guestbook + "/deployment.yaml": fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: guestbook
spec:
  selector:
    matchLabels: {app: guestbook}
  template:
    metadata:
      labels: {app: guestbook}
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: guestbook
        image: %s
        env:
        - {name: GREETING, value: guestbook}
        - {name: SECRET_FILE, value: /config/greeting}
        ports:
        - containerPort: 8080
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 2
        volumeMounts:
        - {name: config, mountPath: /config, readOnly: true}
      volumes:
      - name: config
        configMap: {name: guestbook}
`, image),
		Guestbook + "/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: guestbook
spec:
  selector: {app: guestbook}
  ports:
  - port: 80
    targetPort: 8080
`,
	}
}
