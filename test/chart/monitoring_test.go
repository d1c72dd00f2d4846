package chart

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/propagation"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/fakehub"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// monitoringValues turn on the dashboard and the alerts.
func monitoringValues() map[string]any {
	return map[string]any{"metrics": map[string]any{
		"dashboard":      map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	}}
}

// dashboardFile is the chart's dashboard, as the ConfigMap carries it.
const dashboardFile = "argocd-agent-addon.json"

// monitoringExpressions renders the chart with the dashboard and the alerts on and returns
// every PromQL expression in them, keyed by where it is ("panel <title>", "alert <name>",
// "variable <name>"), and the Grafana variables' label_values label names by metric.
func monitoringExpressions(t *testing.T, vals map[string]any) (exprs map[string]string, variableLabels map[string][]string) {
	t.Helper()
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objs, "ConfigMap", releaseName+"-dashboard")
	rule := find(objs, "PrometheusRule", releaseName)
	if cm == nil || rule == nil {
		t.Fatalf("with monitoring on, the chart renders no dashboard ConfigMap or no PrometheusRule: %v", kinds(objs))
	}
	exprs, variableLabels = map[string]string{}, map[string][]string{}
	data, _, _ := unstructured.NestedString(cm.Object, "data", dashboardFile)
	var dash struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				exprs[fmt.Sprintf("panel %q (%s)", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q)
			continue
		}
		exprs["variable "+v.Name] = m[1]
		variableLabels[m[1]] = append(variableLabels[m[1]], m[2])
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			name, _ := r["alert"].(string)
			if name == "" {
				name, _ = r["record"].(string)
			}
			exprs["alert "+name], _ = r["expr"].(string)
		}
	}
	return exprs, variableLabels
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

func TestRenderMonitoring(t *testing.T) {
	objs, err := render(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if find(objs, "PrometheusRule", "") != nil || find(objs, "ConfigMap", releaseName+"-dashboard") != nil {
		t.Error("the dashboard and the alerts are opt-in, but the defaults render them")
	}

	vals := map[string]any{"metrics": map[string]any{
		"dashboard": map[string]any{"enabled": true, "namespace": "grafana", "labels": map[string]any{"grafana_dashboard": "1", "team": "gitops"},
			"annotations": map[string]any{"grafana_folder": "GitOps"}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}, "agentsNotReadyPercent": 5,
			"agentsNotReadyFor": "30m", "blocklistPercent": 90, "caExpiryDays": 60, "servingCertificateExpiryDays": 14, "signerRefusals": 3, "signerRefusalsWindow": "1h"},
	}}
	objs, err = render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	cm := find(objs, "ConfigMap", releaseName+"-dashboard")
	if cm == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if cm.GetNamespace() != "grafana" || cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetLabels()["team"] != "gitops" || cm.GetAnnotations()["grafana_folder"] != "GitOps" {
		t.Errorf("dashboard ConfigMap %s/%s labels %v annotations %v: want it in grafana with the sidecar's label and the folder annotation",
			cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", dashboardFile)
	want, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(data) != strings.TrimSpace(string(want)) {
		t.Errorf("the ConfigMap does not carry dashboards/%s as it is (%d bytes, the file %d)", dashboardFile, len(data), len(want))
	}
	// Grafana lays the panels out on a 24-column grid: each fits, none covers another, ids are
	// unique, and every query uses the dashboard's data source variable.
	var dash struct {
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(want, &dash); err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for i, p := range dash.Panels {
		g := p.GridPos
		if ids[p.ID] || g.X < 0 || g.W <= 0 || g.H <= 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: id %d (repeated: %v), gridPos %+v", p.Title, p.ID, ids[p.ID], g)
		}
		ids[p.ID] = true
		for _, q := range dash.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %q and %q overlap: %+v, %+v", q.Title, p.Title, o, g)
			}
		}
		for _, tg := range p.Targets {
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a query does not use the data source variable", p.Title)
			}
		}
	}
	rule := find(objs, "PrometheusRule", releaseName)
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	if rule.GetNamespace() != releaseNS || rule.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule %s/%s labels %v: want the release namespace and the given labels", rule.GetNamespace(), rule.GetName(), rule.GetLabels())
	}
	raw, _ := json.Marshal(rule.Object["spec"])
	for _, s := range []string{`\u003e 5`, `"for":"30m"`, `\u003e 90`, `60 * 86400`, `14 * 86400`, `[1h])) \u003e 3`, `available agent for 30m`, `reason }} in 1h`} {
		if !strings.Contains(string(raw), s) {
			t.Errorf("the PrometheusRule does not carry the value %q: %s", s, raw)
		}
	}
	alerts := map[string]bool{}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			alerts[r["alert"].(string)] = true
			ann, _ := r["annotations"].(map[string]any)
			if d, _ := ann["description"].(string); !strings.Contains(d, "docs/") {
				t.Errorf("alert %s: its description does not point to the docs: %q", r["alert"], d)
			}
		}
	}
	for _, a := range []string{"ArgoCDAgentsNotReady", "ArgoCDAgentBlocklistNearlyFull", "ArgoCDAgentCAExpiring", "ArgoCDAgentServingCertificateExpiring",
		"ArgoCDAgentRevocationBreakerTripped", "ArgoCDAgentSignerRefusalsRising"} {
		if !alerts[a] {
			t.Errorf("no alert %s among %v", a, alerts)
		}
	}
	// Each alert's description points to its section of docs/monitoring.md.
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	for a := range alerts {
		if !strings.Contains(string(doc), "\n### "+a+"\n") {
			t.Errorf("docs/monitoring.md has no section ### %s", a)
		}
	}

	// The chart lints with them on, and the schema refuses what Prometheus would.
	res := action.NewLint().Run([]string{chartDir()}, monitoringValues())
	for _, m := range res.Messages {
		if m.Severity >= support.ErrorSev {
			t.Errorf("lint: %s", m)
		}
	}
	for name, bad := range map[string]map[string]any{
		"a Go duration Prometheus refuses": {"prometheusRule": map[string]any{"agentsNotReadyFor": "1.5h"}},
		"a percentage over 100":            {"prometheusRule": map[string]any{"blocklistPercent": 120}},
		"an unknown key":                   {"dashboard": map[string]any{"enable": true}},
	} {
		if _, err := render(t, map[string]any{"metrics": bad}); err == nil {
			t.Errorf("%s: the schema took it", name)
		}
	}
}

// TestMonitoringNamesOnlyMetricsTheManagerServes runs the manager against a real API server
// with a GitOpsCluster whose agent is available and a pull-model Application it must refuse,
// scrapes its /metrics, and checks every
// expression of the chart's dashboard and alerts: each metric it names is served, each label
// it matches on is a label of that metric, and each value it matches is one the metric takes.
// The docs list exactly the project's metrics the manager serves.
func TestMonitoringNamesOnlyMetricsTheManagerServes(t *testing.T) {
	exprs, variableLabels := monitoringExpressions(t, monitoringValues())
	if len(exprs) < 25 {
		t.Fatalf("read only %d expressions from the dashboard and the alerts", len(exprs))
	}

	env := testenv.StartForTest(t, testenv.Options{WithArgoCD: true})
	ctx := context.Background()
	admin := env.Client
	for _, ns := range []string{releaseNS, "cluster1", "argocd"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "argocd-placement"}}); err != nil {
		t.Fatal(err)
	}
	if err := fakehub.SetDecisionPage(ctx, admin, releaseNS, "argocd-placement", 1, []string{"cluster1"}); err != nil {
		t.Fatal(err)
	}
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: addonName}}
	if err := admin.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&mca.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Test", Message: "stands in for OCM"})
	if err := admin.Status().Update(ctx, mca); err != nil {
		t.Fatal(err)
	}
	// The principal's address is given, so that no Service or Node is needed to discover it.
	goc := &v1alpha1.GitOpsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: releaseNS, Name: "my-gitops-cluster"},
		Spec: v1alpha1.GitOpsClusterSpec{PlacementRef: v1alpha1.PlacementReference{Kind: "Placement", Name: "argocd-placement"},
			ArgoCDAgentAddon: v1alpha1.ArgoCDAgentAddonSpec{Mode: v1alpha1.AgentModeManaged, PrincipalServerAddress: "principal.example.com"}}}
	if err := admin.Create(ctx, goc); err != nil {
		t.Fatal(err)
	}

	// A pull-model Application that names no cluster: its delivery is refused.
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"namespace": "argocd", "name": "no-cluster", "labels": map[string]any{pullmodel.LabelPull: "true"}},
		"spec": map[string]any{"project": "default", "destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "guestbook"},
			"source": map[string]any{"repoURL": "https://git.example.com/guestbook.git", "path": "."}},
	}}
	if err := admin.Create(ctx, app); err != nil {
		t.Fatal(err)
	}

	// The manager built as the binary builds it, serving /metrics on plain HTTP. Controller
	// names may repeat: another test of the package may have run a manager in this process.
	opts := manager.DefaultOptions()
	opts.Fleet.ManagedNamespaces = []string{releaseNS}
	metricsAddr := freeAddr(t)
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mo := manager.ControllerOptions(scheme, opts)
	mo.Metrics = metricsserver.Options{BindAddress: metricsAddr}
	mo.HealthProbeBindAddress = "0"
	mo.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(env.Config, mo)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := manager.Setup(mctx, mgr, opts); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// The GitOpsCluster's status and its principal's PKI, as the fleet gauges report them.
	gocSeries := map[string]string{"gitopscluster_namespace": releaseNS, "gitopscluster": goc.Name}
	var served exposition
	poll.Until(t, "the fleet metrics of a Ready GitOpsCluster with its PKI, and a refused delivery", 2*time.Minute, func() error {
		var err error
		if served, err = scrapeExposition("http://" + metricsAddr + "/metrics"); err != nil {
			return err
		}
		for _, want := range []struct {
			name   string
			labels map[string]string
			value  float64
			// atLeast: a counter, which a second pass over the same object may raise again.
			atLeast bool
		}{
			{"argocd_agent_addon_gitopscluster_selected_clusters", gocSeries, 1, false},
			{"argocd_agent_addon_gitopscluster_available_agents", gocSeries, 1, false},
			{"argocd_agent_addon_gitopscluster_condition", with(gocSeries, "condition", v1alpha1.ConditionReady), 1, false},
			{"argocd_agent_addon_blocklist_entries", map[string]string{"principal_namespace": releaseNS}, 0, false},
			{"argocd_agent_addon_pull_model_enabled", nil, 1, false},
			{"argocd_agent_addon_pull_model_deliveries_total", map[string]string{"result": "refused", "reason": propagation.ReasonMissingCluster}, 1, true},
		} {
			if got, ok := served.value(want.name, want.labels); !ok || got != want.value && !(want.atLeast && got > want.value) {
				return fmt.Errorf("%s%v = %v (served: %v), want %v", want.name, want.labels, got, ok, want.value)
			}
		}
		for _, secret := range []string{"argocd-agent-ca", "argocd-agent-principal-tls", "argocd-agent-resource-proxy-tls"} {
			at, ok := served.value("argocd_agent_addon_certificate_expiry_timestamp_seconds", map[string]string{"principal_namespace": releaseNS, "secret": secret})
			if !ok || time.Unix(int64(at), 0).Before(time.Now().Add(24*time.Hour)) {
				return fmt.Errorf("certificate expiry of %s: %v (served: %v)", secret, at, ok)
			}
		}
		return nil
	})
	// The values are the cache's: the GitOpsCluster's own status, as the API server has it.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(goc), goc); err != nil {
		t.Fatal(err)
	}
	for _, c := range goc.Status.Conditions {
		want := 0.0
		if c.Status == metav1.ConditionTrue {
			want = 1
		}
		if got, ok := served.value("argocd_agent_addon_gitopscluster_condition", with(with(gocSeries, "condition", c.Type), "reason", c.Reason)); !ok || got != want {
			t.Errorf("condition %s (%s, %s) served as %v (%v), want %v", c.Type, c.Status, c.Reason, got, ok, want)
		}
	}

	declared := declaredConditionValues(t)
	if problems := checkExpressions(exprs, variableLabels, served, declared); len(problems) > 0 {
		t.Errorf("the dashboard and the alerts name what the manager does not serve:\n  %s", strings.Join(problems, "\n  "))
	}

	// docs/monitoring.md lists every project metric the manager serves, and no other.
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(argocd_agent_addon_[a-z0-9_]+)").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	families := served.families("argocd_agent_addon_")
	for _, f := range families {
		if !documented[f] {
			t.Errorf("docs/monitoring.md does not list the metric %s", f)
		}
	}
	for d := range documented {
		if !slices.Contains(families, d) {
			t.Errorf("docs/monitoring.md lists %s, which the manager does not serve", d)
		}
	}
}

// TestMetricCheckRejectsWhatIsNotServed: the check that the test above relies on finds an
// unknown metric, a label the metric does not have, a value it never takes and a misspelt
// condition reason, and passes what is served.
func TestMetricCheckRejectsWhatIsNotServed(t *testing.T) {
	served, err := parseExposition(strings.NewReader(`# HELP argocd_agent_addon_csr_total x
# TYPE argocd_agent_addon_csr_total counter
argocd_agent_addon_csr_total{reason="Signed",result="signed"} 1
argocd_agent_addon_csr_total{reason="Revoked",result="rejected"} 0
argocd_agent_addon_gitopscluster_condition{condition="Ready",gitopscluster="a",gitopscluster_namespace="b",reason="Ready"} 1
controller_runtime_reconcile_time_seconds_bucket{controller="gitopscluster",le="+Inf"} 3
`))
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{"RevocationPaused": true, "TooManyDepartures": true}
	good := map[string]string{
		"rate":      `sum by (reason) (increase(argocd_agent_addon_csr_total{job=~"$job", result="rejected"}[$__rate_interval])) > 0`,
		"histogram": `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{controller="gitopscluster"}[5m])))`,
		"declared":  `argocd_agent_addon_gitopscluster_condition{condition="RevocationPaused", reason="TooManyDepartures"} == 1`,
	}
	if problems := checkExpressions(good, nil, served, declared); len(problems) > 0 {
		t.Errorf("served expressions refused: %v", problems)
	}
	for name, bad := range map[string]string{
		"unknown metric":    `sum(rate(argocd_agent_addon_csr_totals[5m]))`,
		"unknown label":     `argocd_agent_addon_csr_total{outcome="signed"}`,
		"value never seen":  `argocd_agent_addon_csr_total{result="refused"}`,
		"misspelt reason":   `argocd_agent_addon_gitopscluster_condition{condition="RevocationPaused", reason="TooManyDeparture"}`,
		"in an alternation": `argocd_agent_addon_csr_total{result=~"signed|refused"}`,
		"not PromQL":        `sum(argocd_agent_addon_csr_total`,
	} {
		if problems := checkExpressions(map[string]string{name: bad}, nil, served, declared); len(problems) == 0 {
			t.Errorf("%s: %s passed the check", name, bad)
		}
	}
	if problems := checkExpressions(map[string]string{"variable": "argocd_agent_addon_csr_total"}, map[string][]string{"argocd_agent_addon_csr_total": {"cluster"}}, served, declared); len(problems) == 0 {
		t.Error("a label_values variable over a label the metric does not have passed the check")
	}
}

// TestPromQLSelectorsAreRead: the selectors of an expression are found, and nothing else
// (functions, aggregations, grouping labels, keywords, durations, strings) is taken for one.
func TestPromQLSelectorsAreRead(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (namespace, le) (rate(a_total{x="1", y!~"a|b"}[5m:30s] offset 1h)) / on (namespace) group_left (pod) b:recorded > bool 0.8`: {
			`a_total{x="1",y!~"a|b"}`, `b:recorded{}`},
		`sum(c) without (instance) unless d @ start() and count_over_time(e{z=~"$var"}[$__rate_interval]) or vector(0)`: {
			`c{}`, `d{}`, `e{z=~"$var"}`},
		`{__name__="f", le="+Inf"} * -1e+06 - 0x1F + Inf # a comment naming g`:     {`f{__name__="f",le="+Inf"}`},
		`atan2(h, i) > 1.5 and topk(3, j{k='single "quoted"', l=` + "`raw`" + `})`: {`h{}`, `i{}`, `j{k="single \"quoted\"",l="raw"}`},
	} {
		sels, err := promSelectors(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", expr, got, want)
		}
	}
	for _, bad := range []string{`sum(a`, `a{b="c"`, `a{b}`, `a{b="c}`, `a[5m`} {
		if _, err := promSelectors(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// scrapeLabels are the labels Prometheus adds to every series of a target: a dashboard or a
// rule may match on them, but the manager does not serve them.
var scrapeLabels = map[string]bool{"job": true, "instance": true, "pod": true, "namespace": true, "service": true, "endpoint": true, "container": true}

// conditionMetric is the metric whose condition and reason labels take the values the API
// declares (apis/v1alpha1/conditions.go), whether or not the test's fleet has them now.
const conditionMetric = "argocd_agent_addon_gitopscluster_condition"

// checkExpressions returns what is wrong with exprs (by where they are) against served: a
// metric without a series, a label matcher on a label no series of the metric has, or an
// equality (or literal alternation) on a value no series takes and, for conditionMetric's
// condition and reason, the API does not declare. variableLabels are label_values variables'
// labels by their selector.
func checkExpressions(exprs map[string]string, variableLabels map[string][]string, served exposition, declared map[string]bool) []string {
	var problems []string
	wheres := make([]string, 0, len(exprs))
	for w := range exprs {
		wheres = append(wheres, w)
	}
	sort.Strings(wheres)
	literalAlternation := regexp.MustCompile(`^[A-Za-z0-9_\-.:/]+(\|[A-Za-z0-9_\-.:/]+)*$`)
	for _, where := range wheres {
		expr := exprs[where]
		sels, err := promSelectors(expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v in %q", where, err, expr))
			continue
		}
		if len(sels) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no metric in %q", where, expr))
		}
		for _, s := range sels {
			series := served[s.name]
			if len(series) == 0 {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not served", where, s.name))
				continue
			}
			labels := s.matchers
			for _, l := range variableLabels[expr] {
				labels = append(labels, matcher{label: l, op: "=~", value: ".*"})
			}
			for _, m := range labels {
				if m.label == "__name__" || scrapeLabels[m.label] {
					continue
				}
				if !slices.ContainsFunc(series, func(ls map[string]string) bool { _, ok := ls[m.label]; return ok }) {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %s", where, s.name, m.label))
					continue
				}
				var values []string
				switch {
				case strings.Contains(m.value, "$"):
				case m.op == "=" || m.op == "!=":
					values = []string{m.value}
				case literalAlternation.MatchString(m.value):
					values = strings.Split(m.value, "|")
				}
				for _, v := range values {
					taken := slices.ContainsFunc(series, func(ls map[string]string) bool { return ls[m.label] == v })
					if !taken && !(s.name == conditionMetric && (m.label == "condition" || m.label == "reason") && declared[v]) {
						problems = append(problems, fmt.Sprintf("%s: %s never has %s=%q", where, s.name, m.label, v))
					}
				}
			}
		}
	}
	return problems
}

// declaredConditionValues are the string constants of apis/v1alpha1/conditions.go: the
// condition types and reasons a GitOpsCluster may have.
func declaredConditionValues(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(testenv.RepoRoot(), "apis", "v1alpha1", "conditions.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil {
				out[v] = true
			}
		}
		return true
	})
	if !out[v1alpha1.ReasonTooManyDepartures] || !out[v1alpha1.ConditionRevocationPaused] {
		t.Fatal("apis/v1alpha1/conditions.go no longer declares the conditions as string constants")
	}
	return out
}

// exposition is a scrape: series label sets by series name (a histogram's _bucket, _sum and
// _count apart, as PromQL names them).
type exposition map[string][]map[string]string

// value returns the value of the series of name whose labels include labels.
func (e exposition) value(name string, labels map[string]string) (float64, bool) {
	for _, ls := range e[name] {
		match := true
		for k, v := range labels {
			if ls[k] != v {
				match = false
			}
		}
		if match {
			f, err := strconv.ParseFloat(ls[valueKey], 64)
			return f, err == nil
		}
	}
	return 0, false
}

// families returns the metric families with prefix, by their name (a histogram's series
// folded into it).
func (e exposition) families(prefix string) []string {
	seen := map[string]bool{}
	for name, series := range e {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		seen[series[0][familyKey]] = true
	}
	out := make([]string, 0, len(seen))
	for f := range seen {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// valueKey and familyKey hold a series' value and its family in its label set; they cannot
// be label names.
const (
	valueKey  = " value"
	familyKey = " family"
)

func scrapeExposition(url string) (exposition, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseExposition(resp.Body)
}

// parseExposition reads Prometheus's text format.
func parseExposition(r io.Reader) (exposition, error) {
	out := exposition{}
	family := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE ") {
			family = strings.Fields(line)[2]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		name, rest := line[:end], line[end:]
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			i := 1
			for i < len(rest) && rest[i] != '}' {
				eq := strings.IndexByte(rest[i:], '=')
				if eq < 0 || i+eq+1 >= len(rest) || rest[i+eq+1] != '"' {
					return nil, fmt.Errorf("bad labels in %q", line)
				}
				key := rest[i : i+eq]
				j := i + eq + 2
				var v strings.Builder
				for ; j < len(rest) && rest[j] != '"'; j++ {
					if rest[j] == '\\' && j+1 < len(rest) {
						j++
						if rest[j] == 'n' {
							v.WriteByte('\n')
							continue
						}
					}
					v.WriteByte(rest[j])
				}
				if j >= len(rest) {
					return nil, fmt.Errorf("unterminated label value in %q", line)
				}
				labels[key] = v.String()
				i = j + 1
				if i < len(rest) && rest[i] == ',' {
					i++
				}
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("unterminated labels in %q", line)
			}
			rest = rest[i+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		labels[valueKey] = fields[0]
		labels[familyKey] = name
		if family != "" && strings.HasPrefix(name, family) {
			labels[familyKey] = family
		}
		out[name] = append(out[name], labels)
	}
	return out, sc.Err()
}

// selector is a PromQL vector selector: a metric name and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct{ label, op, value string }

func (s selector) String() string {
	var ms []string
	for _, m := range s.matchers {
		ms = append(ms, m.label+m.op+strconv.Quote(m.value))
	}
	return s.name + "{" + strings.Join(ms, ",") + "}"
}

// promKeywords are PromQL words that are never metric names where they stand; grouping ones
// are followed by a list of label names.
var (
	promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	promWords    = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true, "inf": true, "nan": true}
)

// promSelectors returns the vector selectors of a PromQL expression, in order. It reads what
// a dashboard or a rule may hold (Grafana's $variables too) without evaluating anything: an
// identifier is a metric name unless it calls a function or aggregation, is a keyword, or lists
// grouping labels.
func promSelectors(expr string) ([]selector, error) {
	toks, err := promTokens(expr)
	if err != nil {
		return nil, err
	}
	var out []selector
	depth := 0
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := func() string {
			if i+1 < len(toks) {
				return toks[i+1].text
			}
			return ""
		}
		switch {
		case tk.text == "(":
			depth++
		case tk.text == ")":
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", expr)
			}
		case tk.text == "[":
			j := i + 1
			for j < len(toks) && toks[j].text != "]" {
				j++
			}
			if j == len(toks) {
				return nil, fmt.Errorf("unterminated [ in %q", expr)
			}
			i = j
		case tk.kind == tokIdent && promGrouping[strings.ToLower(tk.text)]:
			if next() == "(" {
				j := i + 1
				for j < len(toks) && toks[j].text != ")" {
					j++
				}
				if j == len(toks) {
					return nil, fmt.Errorf("unterminated label list in %q", expr)
				}
				i = j
			}
		case tk.kind == tokIdent && promWords[strings.ToLower(tk.text)]:
		case tk.kind == tokIdent && (next() == "(" || promGrouping[strings.ToLower(next())]):
			// A function, or an aggregation (its grouping may come first).
		case tk.kind == tokIdent:
			s := selector{name: tk.text}
			if next() == "{" {
				ms, end, err := promMatchers(toks, i+1, expr)
				if err != nil {
					return nil, err
				}
				s.matchers, i = ms, end
			}
			out = append(out, s)
		case tk.text == "{":
			ms, end, err := promMatchers(toks, i, expr)
			if err != nil {
				return nil, err
			}
			s := selector{matchers: ms}
			for _, m := range ms {
				if m.label == "__name__" && m.op == "=" {
					s.name = m.value
				}
			}
			if s.name == "" {
				return nil, fmt.Errorf("a selector without a metric name in %q", expr)
			}
			out, i = append(out, s), end
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return out, nil
}

// promMatchers reads the label matchers of the braces opening at toks[open] and returns the
// index of the closing brace.
func promMatchers(toks []promToken, open int, expr string) ([]matcher, int, error) {
	var out []matcher
	i := open + 1
	for i < len(toks) && toks[i].text != "}" {
		if i+2 >= len(toks) || (toks[i].kind != tokIdent && toks[i].kind != tokString) || toks[i+1].kind != tokOp || toks[i+2].kind != tokString {
			return nil, 0, fmt.Errorf("bad label matcher in %q", expr)
		}
		if op := toks[i+1].text; op != "=" && op != "!=" && op != "=~" && op != "!~" {
			return nil, 0, fmt.Errorf("bad label matcher operator %s in %q", op, expr)
		}
		out = append(out, matcher{label: toks[i].value(), op: toks[i+1].text, value: toks[i+2].value()})
		i += 3
		if i < len(toks) && toks[i].text == "," {
			i++
		}
	}
	if i >= len(toks) {
		return nil, 0, fmt.Errorf("unterminated { in %q", expr)
	}
	return out, i, nil
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokNumber
	tokVar
	tokOp
	tokPunct
)

type promToken struct {
	kind tokKind
	text string
	// str is a string literal's value.
	str string
}

func (t promToken) value() string {
	if t.kind == tokString {
		return t.str
	}
	return t.text
}

var (
	promNumber = regexp.MustCompile(`^(0[xX][0-9a-fA-F]+|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?[a-zA-Z0-9]*)`)
	promIdent  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promVar    = regexp.MustCompile(`^\$(\{[^}]*\}|[a-zA-Z0-9_]+)`)
	promOps    = []string{"==", "!=", "=~", "!~", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "^", "@"}
)

func promTokens(expr string) ([]promToken, error) {
	var out []promToken
	for i := 0; i < len(expr); {
		c := expr[i]
		rest := expr[i:]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			var v strings.Builder
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
				}
				v.WriteByte(expr[j])
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			out = append(out, promToken{kind: tokString, text: expr[i : j+1], str: v.String()})
			i = j + 1
		case promNumber.MatchString(rest):
			m := promNumber.FindString(rest)
			out = append(out, promToken{kind: tokNumber, text: m})
			i += len(m)
		case promIdent.MatchString(rest):
			m := promIdent.FindString(rest)
			out = append(out, promToken{kind: tokIdent, text: m})
			i += len(m)
		case promVar.MatchString(rest):
			m := promVar.FindString(rest)
			out = append(out, promToken{kind: tokVar, text: m})
			i += len(m)
		case strings.ContainsRune("(){}[],", rune(c)):
			out = append(out, promToken{kind: tokPunct, text: string(c)})
			i++
		default:
			op := ""
			for _, o := range promOps {
				if strings.HasPrefix(rest, o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("unexpected %q in %q", c, expr)
			}
			out = append(out, promToken{kind: tokOp, text: op})
			i += len(op)
		}
	}
	return out, nil
}

// with returns labels with k set to v.
func with(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range labels {
		if key != k {
			out[key] = val
		}
	}
	return out
}
