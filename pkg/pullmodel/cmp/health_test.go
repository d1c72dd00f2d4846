package cmp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// These tests follow a ManifestWork the plugin generates through what OCM's work agent
// reports for it and into the hub Argo CD's health of it: the work's own condition rules are
// evaluated (CEL, in the environment the work agent gives them) against the workloads' state
// on the cluster, and health.lua is run by the Argo CD binary this repository pins
// (`argocd admin settings resource-overrides health`, Argo CD's own Lua sandbox, reading the
// entry from an argocd-cm file under cmp.HealthCheckKey).

// workloadFolder is a folder with one of each workload kind and two plain objects.
func workloadFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`,
		"sts.yaml": `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: demo}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
`,
		"ds.yaml": `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logs, namespace: demo}
spec:
  selector: {matchLabels: {app: logs}}
  template:
    metadata: {labels: {app: logs}}
    spec: {containers: [{name: logs, image: fluentbit}]}
`,
		"job.yaml": `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: demo}
spec:
  template:
    spec: {restartPolicy: Never, containers: [{name: migrate, image: migrate}]}
`,
		"plain.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: demo}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec: {ports: [{port: 80}]}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// generatedWork is the one ManifestWork the plugin makes of the folder for cluster c1.
func generatedWork(t *testing.T, dir string) *unstructured.Unstructured {
	t.Helper()
	out, err := cmp.Generate(dir, cmp.Options{Clusters: []string{"c1"}, Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(out, &w.Object); err != nil {
		t.Fatal(err)
	}
	w.SetGeneration(1)
	return w
}

// Readiness states of the workloads on the cluster, as their controllers write them.
var (
	deploymentReady = map[string]any{"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
		"conditions": []any{map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}}}
	// Created, its pods not ready yet (or crashing), within the progress deadline.
	deploymentNotReady = map[string]any{"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "unavailableReplicas": 2,
		"conditions": []any{map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}}}
	// Its pods kept crashing until the progress deadline passed.
	deploymentDeadlineExceeded = map[string]any{"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "unavailableReplicas": 2,
		"conditions": []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
			"message": `ReplicaSet "web-5d8f" has timed out progressing.`}}}
	statefulSetReady = map[string]any{"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3,
		"currentRevision": "db-7c9", "updateRevision": "db-7c9"}
	daemonSetReady = map[string]any{"observedGeneration": 1, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
		"updatedNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2}
	jobComplete = map[string]any{"succeeded": 1,
		"conditions": []any{map[string]any{"type": "SuccessCriteriaMet", "status": "True"}, map[string]any{"type": "Complete", "status": "True"}}}
	jobFailed = map[string]any{"failed": 7,
		"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}}}
)

func allReady() map[string]map[string]any {
	return map[string]map[string]any{"Deployment": deploymentReady, "StatefulSet": statefulSetReady, "DaemonSet": daemonSetReady, "Job": jobComplete}
}

// celEnv is the environment OCM's work agent (v1.2) evaluates condition rules in, as far as
// the rules use it: `object` is the live object, `result` the rule's outcome in messages, and
// optional field selection is on.
func celEnv(t *testing.T, message bool) *cel.Env {
	t.Helper()
	opts := []cel.EnvOption{cel.Variable("object", cel.DynType), cel.OptionalTypes(), ext.Strings()}
	if message {
		opts = append(opts, cel.Variable("result", cel.BoolType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func evalCEL(t *testing.T, env *cel.Env, expr string, vars map[string]any) (any, error) {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return nil, err
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return nil, err
	}
	return out.Value(), nil
}

// evaluateRule is what the work agent does with one condition rule: its expressions ANDed,
// an expression that fails or is not a bool makes the condition False with an error reason.
func evaluateRule(t *testing.T, rule workv1.ConditionRule, live map[string]any) map[string]any {
	t.Helper()
	status, reason, message := "True", workv1.ConditionRuleEvaluated, ""
	for _, expr := range rule.CelExpressions {
		v, err := evalCEL(t, celEnv(t, false), expr, map[string]any{"object": live})
		if b, ok := v.(bool); err != nil || !ok {
			status, reason, message = "False", workv1.ConditionRuleExpressionError, fmt.Sprintf("%v (result %v)", err, v)
			break
		} else if !b {
			status = "False"
			break
		}
	}
	if reason == workv1.ConditionRuleEvaluated {
		v, err := evalCEL(t, celEnv(t, true), rule.MessageExpression, map[string]any{"object": live, "result": status == "True"})
		if s, ok := v.(string); err == nil && ok && s != "" {
			message = s
		} else if err != nil {
			message = err.Error()
		} else {
			message = rule.Message
		}
	}
	return map[string]any{"type": rule.Condition, "status": status, "reason": reason, "message": message}
}

// manifestMeta is the resource meta the work agent reports for a manifest.
func manifestMeta(t *testing.T, raw map[string]any) (workv1.ManifestResourceMeta, *unstructured.Unstructured) {
	t.Helper()
	u := &unstructured.Unstructured{Object: raw}
	gvk := u.GroupVersionKind()
	return workv1.ManifestResourceMeta{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
		Resource: strings.ToLower(gvk.Kind) + "s", Name: u.GetName(), Namespace: u.GetNamespace()}, u
}

func matches(pattern, value string) bool { return pattern == "*" || pattern == value }

// reportStatus writes the status the work agent reports once it applied the work's current
// generation: every manifest applied and available, and the work's condition rules evaluated
// against each object's live state (its manifest with the status in states, by kind, and the
// generation the API server gives a new object). evaluated false leaves the rules out, as
// before the agent's status pass.
func reportStatus(t *testing.T, w *unstructured.Unstructured, states map[string]map[string]any, evaluated bool) {
	t.Helper()
	var spec workv1.ManifestWorkSpec
	raw, _ := json.Marshal(w.Object["spec"])
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	gen := w.GetGeneration()
	cond := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": gen}
	}
	var manifests []any
	for _, m := range spec.Workload.Manifests {
		obj := map[string]any{}
		if err := json.Unmarshal(m.Raw, &obj); err != nil {
			t.Fatal(err)
		}
		meta, live := manifestMeta(t, obj)
		live.SetGeneration(1)
		if s, ok := states[meta.Kind]; ok {
			live.Object["status"] = s
		}
		// The CEL sees the object as the dynamic client decodes it: integers are int64.
		liveJSON, _ := json.Marshal(live.Object)
		decoded := &unstructured.Unstructured{}
		if err := decoded.UnmarshalJSON(liveJSON); err != nil {
			t.Fatal(err)
		}
		conditions := []any{
			cond("Applied", "True", "AppliedManifestComplete", "Apply manifest complete"),
			cond("Available", "True", "ResourceAvailable", "Resource is available"),
			cond("StatusFeedbackSynced", "True", "NoStatusFeedbackSynced", ""),
		}
		if evaluated {
			for _, config := range spec.ManifestConfigs {
				id := config.ResourceIdentifier
				if id.Group != meta.Group || id.Resource != meta.Resource || !matches(id.Name, meta.Name) || !matches(id.Namespace, meta.Namespace) {
					continue
				}
				for _, rule := range config.ConditionRules {
					c := evaluateRule(t, rule, decoded.Object)
					c["observedGeneration"] = gen
					conditions = append(conditions, c)
				}
			}
		}
		metaMap := map[string]any{}
		mb, _ := json.Marshal(meta)
		_ = json.Unmarshal(mb, &metaMap)
		manifests = append(manifests, map[string]any{"resourceMeta": metaMap, "conditions": conditions})
	}
	w.Object["status"] = map[string]any{
		"conditions": []any{
			cond("Applied", "True", "AppliedManifestWorkComplete", "Apply manifest work complete"),
			cond("Available", "True", "ResourcesAvailable", "All resources are available"),
		},
		"resourceStatus": map[string]any{"manifests": manifests},
	}
}

// argocdBinary is the Argo CD binary hack/argocd-binaries.sh keeps beside Argo CD's CRDs.
func argocdBinary(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARGOCD_BINARIES_DIR")
	if dir == "" {
		crds, err := testenv.ArgoCDCRDDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Dir(crds)
	}
	return filepath.Join(dir, "argocd")
}

// argoHealth is the health Argo CD gives the object with health.lua in argocd-cm.
func argoHealth(t *testing.T, obj *unstructured.Unstructured) (status, message string) {
	t.Helper()
	dir := t.TempDir()
	cm, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "argocd-cm", "namespace": "argocd"},
		"data":     map[string]string{cmp.HealthCheckKey: cmp.HealthCheck()},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	cmPath, resPath := filepath.Join(dir, "argocd-cm.yaml"), filepath.Join(dir, "work.yaml")
	if err := os.WriteFile(cmPath, cm, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resPath, res, 0o600); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(argocdBinary(t), "admin", "settings", "resource-overrides", "health", resPath, "--argocd-cm-path", cmPath)
	c.Env = append(os.Environ(), "HOME="+dir)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		t.Fatalf("argocd admin settings resource-overrides health: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "STATUS: "); ok {
			status = v
		}
		if v, ok := strings.CutPrefix(l, "MESSAGE: "); ok {
			message = v
		}
	}
	if status == "" {
		t.Fatalf("no health in Argo CD's output:\n%s%s", stdout.String(), stderr.String())
	}
	return status, message
}

func wantHealth(t *testing.T, w *unstructured.Unstructured, status string, message ...string) {
	t.Helper()
	got, msg := argoHealth(t, w)
	if got != status {
		t.Errorf("health %s (%q), want %s", got, msg, status)
	}
	for _, m := range message {
		if !strings.Contains(msg, m) {
			t.Errorf("health message %q lacks %q", msg, m)
		}
	}
}

// TestHealthAppliedButDeploymentNotReadyIsNotHealthy: OCM's work agent applied every object
// and they exist, but the Deployment's pods are not ready (starting, or crashing within its
// progress deadline). That is Progressing, never Healthy: Applied and Available only say that
// the objects exist.
func TestHealthAppliedButDeploymentNotReadyIsNotHealthy(t *testing.T) {
	w := generatedWork(t, workloadFolder(t))
	states := allReady()
	states["Deployment"] = deploymentNotReady
	reportStatus(t, w, states, true)
	wantHealth(t, w, "Progressing", "Deployment demo/web: 0 of 2 updated replicas available", "3 of 4 workloads ready")
}

// TestHealthDeploymentPastItsProgressDeadlineIsDegraded: a Deployment whose pods crash-loop
// reads Progressing while its rollout may still finish (as Argo CD reads a Deployment) and
// Degraded once the Deployment controller reports its progress deadline exceeded.
func TestHealthDeploymentPastItsProgressDeadlineIsDegraded(t *testing.T) {
	w := generatedWork(t, workloadFolder(t))
	states := allReady()
	states["Deployment"] = deploymentDeadlineExceeded
	reportStatus(t, w, states, true)
	wantHealth(t, w, "Degraded", "Deployment demo/web: progress deadline exceeded: 0 of 2 replicas available")
}

// TestHealthEveryWorkloadReadyIsHealthy: Deployment, StatefulSet, DaemonSet and Job ready,
// and the plain objects applied: Healthy.
func TestHealthEveryWorkloadReadyIsHealthy(t *testing.T) {
	w := generatedWork(t, workloadFolder(t))
	reportStatus(t, w, allReady(), true)
	wantHealth(t, w, "Healthy", "All 4 workloads ready")
}

// TestHealthStates covers the other ways a work reads: readiness not yet reported or for an
// older generation, an object the agent could not apply, a failed Job, a rule the agent could
// not evaluate, a work without readiness rules.
func TestHealthStates(t *testing.T) {
	t.Run("no status yet", func(t *testing.T) {
		wantHealth(t, generatedWork(t, workloadFolder(t)), "Progressing", "Waiting for OCM's work agent")
	})
	t.Run("applied, readiness not reported yet", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		reportStatus(t, w, allReady(), false)
		wantHealth(t, w, "Progressing", "waiting for the work agent to report its readiness")
	})
	t.Run("readiness reported for an older generation", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		reportStatus(t, w, allReady(), true)
		manifests, _, _ := unstructured.NestedSlice(w.Object, "status", "resourceStatus", "manifests")
		for _, m := range manifests {
			for _, c := range m.(map[string]any)["conditions"].([]any) {
				if c := c.(map[string]any); c["type"] == "Ready" {
					c["observedGeneration"] = int64(0)
				}
			}
		}
		_ = unstructured.SetNestedSlice(w.Object, manifests, "status", "resourceStatus", "manifests")
		wantHealth(t, w, "Progressing", "waiting for the work agent to report its readiness")
	})
	t.Run("a new generation not applied yet", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		reportStatus(t, w, allReady(), true)
		w.SetGeneration(2)
		wantHealth(t, w, "Progressing", "Waiting for OCM's work agent")
	})
	t.Run("a manifest not applied", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		reportStatus(t, w, allReady(), true)
		conds, _, _ := unstructured.NestedSlice(w.Object, "status", "conditions")
		conds[0].(map[string]any)["status"], conds[0].(map[string]any)["message"] = "False", "Failed to apply manifest work"
		manifests, _, _ := unstructured.NestedSlice(w.Object, "status", "resourceStatus", "manifests")
		m := manifests[len(manifests)-1].(map[string]any)
		m["conditions"] = []any{map[string]any{"type": "Applied", "status": "False", "reason": "AppliedManifestFailed",
			"message": "Failed to apply manifest: forbidden", "observedGeneration": int64(1)}}
		_ = unstructured.SetNestedSlice(w.Object, conds, "status", "conditions")
		_ = unstructured.SetNestedSlice(w.Object, manifests, "status", "resourceStatus", "manifests")
		wantHealth(t, w, "Degraded", "Failed to apply manifest: forbidden")
	})
	t.Run("a failed Job", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		states := allReady()
		states["Job"] = jobFailed
		reportStatus(t, w, states, true)
		wantHealth(t, w, "Degraded", "Job demo/migrate: failed: BackoffLimitExceeded")
	})
	t.Run("a rule the agent could not evaluate", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		configs, _, _ := unstructured.NestedSlice(w.Object, "spec", "manifestConfigs")
		if len(configs) == 0 {
			t.Fatal("the work has no readiness rules")
		}
		rules := configs[0].(map[string]any)["conditionRules"].([]any)
		rules[0].(map[string]any)["celExpressions"] = []any{"object.spec.noSuchField > 0"}
		_ = unstructured.SetNestedSlice(w.Object, configs, "spec", "manifestConfigs")
		reportStatus(t, w, allReady(), true)
		wantHealth(t, w, "Degraded", "Deployment demo/web: its readiness could not be evaluated")
	})
	t.Run("a work without readiness rules", func(t *testing.T) {
		w := generatedWork(t, workloadFolder(t))
		unstructured.RemoveNestedField(w.Object, "spec", "manifestConfigs")
		reportStatus(t, w, map[string]map[string]any{"Deployment": deploymentNotReady}, true)
		wantHealth(t, w, "Healthy", "All resources are available")
	})
}

// TestReadinessRules evaluates the rules the plugin gives each workload kind against the
// states their controllers write, as the work agent does: Ready, Progressing, and the message.
func TestReadinessRules(t *testing.T) {
	w := generatedWork(t, workloadFolder(t))
	var spec workv1.ManifestWorkSpec
	raw, _ := json.Marshal(w.Object["spec"])
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	rules := map[string][]workv1.ConditionRule{}
	for _, c := range spec.ManifestConfigs {
		rules[c.ResourceIdentifier.Resource] = c.ConditionRules
		if c.ResourceIdentifier.Name != "*" || c.ResourceIdentifier.Namespace != "*" {
			t.Errorf("%s: the rules apply to %v, want every object of the kind", c.ResourceIdentifier.Resource, c.ResourceIdentifier)
		}
	}
	if len(rules) != 4 || len(spec.ManifestConfigs) != 4 {
		t.Fatalf("readiness rules for %v, want deployments, statefulsets, daemonsets and jobs", rules)
	}
	live := func(kind, spec string, status map[string]any) map[string]any {
		u := &unstructured.Unstructured{}
		s, _ := json.Marshal(status)
		if err := u.UnmarshalJSON(fmt.Appendf(nil, `{"apiVersion":"x/v1","kind":%q,"metadata":{"name":"a","generation":2},"spec":%s,"status":%s}`, kind, spec, s)); err != nil {
			t.Fatal(err)
		}
		return u.Object
	}
	for _, tc := range []struct {
		name, resource, spec string
		status               map[string]any
		ready, progressing   bool
		message              string
	}{
		{"Deployment just created", "deployments", `{"replicas":2}`, map[string]any{}, false, true, "waiting for the controller to observe generation 2"},
		{"Deployment of an older generation", "deployments", `{"replicas":2}`, map[string]any{"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}, false, true, "observe generation 2"},
		{"Deployment rolling", "deployments", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1, "availableReplicas": 3}, false, true, "1 of 3 replicas updated"},
		{"Deployment old pods terminating", "deployments", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}, false, true, "1 old replicas pending termination"},
		{"Deployment updated, not available", "deployments", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1}, false, true, "1 of 3 updated replicas available"},
		{"Deployment past its deadline", "deployments", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 1,
			"conditions": []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}}}, false, false, "progress deadline exceeded: 1 of 3 replicas available"},
		{"Deployment ready", "deployments", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}, true, false, "3 of 3 replicas available"},
		{"Deployment scaled to zero", "deployments", `{"replicas":0}`, map[string]any{"observedGeneration": 2}, true, false, "0 of 0 replicas available"},
		{"Deployment without replicas set", "deployments", `{}`, map[string]any{"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}, true, false, "1 of 1"},
		{"StatefulSet not ready", "statefulsets", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1"}, false, true, "2 of 3 replicas ready"},
		{"StatefulSet rolling update", "statefulsets", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 1, "currentRevision": "r1", "updateRevision": "r2"}, false, true, "rolling update in progress: 1 of 3 replicas updated"},
		{"StatefulSet partitioned update done", "statefulsets", `{"replicas":3,"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":2}}}`, map[string]any{"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 1, "currentRevision": "r1", "updateRevision": "r2"}, true, false, "3 of 3 replicas ready"},
		{"StatefulSet updated on delete", "statefulsets", `{"replicas":3,"updateStrategy":{"type":"OnDelete"}}`, map[string]any{"observedGeneration": 2, "readyReplicas": 3, "currentRevision": "r1", "updateRevision": "r2"}, true, false, "3 of 3"},
		{"StatefulSet ready", "statefulsets", `{"replicas":3}`, map[string]any{"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 3, "currentRevision": "r2", "updateRevision": "r2"}, true, false, "3 of 3 replicas ready"},
		{"DaemonSet updating", "daemonsets", `{}`, map[string]any{"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 1, "numberAvailable": 3}, false, true, "1 of 3 scheduled pods updated"},
		{"DaemonSet pods unavailable", "daemonsets", `{}`, map[string]any{"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 2}, false, true, "2 of 3 scheduled pods available"},
		{"DaemonSet ready", "daemonsets", `{}`, map[string]any{"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3}, true, false, "3 of 3 scheduled pods available"},
		{"Job running", "jobs", `{}`, map[string]any{"active": 1, "failed": 1}, false, true, "1 active, 0 succeeded, 1 failed pods"},
		{"Job failed", "jobs", `{}`, map[string]any{"failed": 7, "conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}}}, false, false, "failed: BackoffLimitExceeded"},
		{"Job complete", "jobs", `{}`, jobComplete, true, false, "complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind := map[string]string{"deployments": "Deployment", "statefulsets": "StatefulSet", "daemonsets": "DaemonSet", "jobs": "Job"}[tc.resource]
			obj := live(kind, tc.spec, tc.status)
			got := map[string]map[string]any{}
			for _, r := range rules[tc.resource] {
				got[r.Condition] = evaluateRule(t, r, obj)
			}
			ready, progressing := got["Ready"], got["Progressing"]
			if ready == nil || progressing == nil {
				t.Fatalf("conditions %v, want Ready and Progressing", got)
			}
			for _, c := range got {
				if c["reason"] != workv1.ConditionRuleEvaluated {
					t.Fatalf("%s not evaluated: %v", c["type"], c)
				}
			}
			if (ready["status"] == "True") != tc.ready || (progressing["status"] == "True") != tc.progressing {
				t.Errorf("Ready %v, Progressing %v; want %v, %v", ready["status"], progressing["status"], tc.ready, tc.progressing)
			}
			if !strings.Contains(ready["message"].(string), tc.message) || ready["message"] != progressing["message"] {
				t.Errorf("messages %q and %q, want %q", ready["message"], progressing["message"], tc.message)
			}
		})
	}
	// A work without workloads has no readiness rules.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if configs, _, _ := unstructured.NestedSlice(generatedWork(t, dir).Object, "spec", "manifestConfigs"); len(configs) != 0 {
		t.Errorf("a work of a ConfigMap has readiness rules: %v", configs)
	}
}
