package benchkit

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestMeterOnARealAPIServer counts a known workload on a real API server: 40 Secrets created
// by a ServiceAccount and one ConfigMap created and updated 3 times by an admin are 44 writes,
// the watch this test opens on the Secrets is told of each, API Priority and Fairness classes
// the ServiceAccount's 40 requests as the default flow schemas say, and the API server's CPU
// for them is read.
func TestMeterOnARealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	env := testenv.StartForTest(t, testenv.Options{})
	ctx := context.Background()
	m, err := NewMeter(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pids[APIServer]) != 1 || len(m.Pids[Etcd]) != 1 {
		t.Fatalf("processes found %v, want one API server and one etcd", m.Pids)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "meter"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	writer := testenv.ServiceAccount("meter", "writer")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "meter", Name: "writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "meter", Name: "writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "meter", Name: "writer"}}}
	createSecrets := authorizationv1.ResourceAttributes{Namespace: "meter", Verb: "create", Resource: "secrets"}
	if err := testenv.Grant(ctx, env.Client, writer, []authorizationv1.ResourceAttributes{createSecrets}, role, binding); err != nil {
		t.Fatal(err)
	}
	writerCfg, err := env.UserConfig(writer.User, writer.Groups...)
	if err != nil {
		t.Fatal(err)
	}
	asWriter := kubernetes.NewForConfigOrDie(writerCfg)
	w, err := cs.CoreV1().Secrets("meter").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	before, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%02d", i)}, Data: map[string][]byte{"k": make([]byte, 1024)}}
		if _, err := asWriter.CoreV1().Secrets("meter").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm, err := cs.CoreV1().ConfigMaps("meter").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cm.Data = map[string]string{"i": fmt.Sprint(i)}
		if cm, err = cs.CoreV1().ConfigMaps("meter").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for seen := 0; seen < 40; seen++ {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Added {
				t.Fatalf("watch event %s", ev.Type)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the watch saw %d of 40 Secrets", seen)
		}
	}
	after, err := m.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := after.Since(before)
	if w := c.Writes(); w["secrets"] != 40 || w["configmaps"] != 4 || Total(w) != 44 {
		t.Errorf("writes %v, want 40 Secrets and 4 ConfigMap writes", w)
	}
	// Every watcher of Secrets is told of each: this test's watch and any the API server keeps
	// itself.
	if c.Watchers["secrets"] < 1 || c.Events["secrets"] != 40*c.Watchers["secrets"] {
		t.Errorf("%d Secret watch events for 40 Secrets and %d watchers", c.Events["secrets"], c.Watchers["secrets"])
	}
	// The default flow schemas put the requests of a ServiceAccount outside kube-system at
	// workload-low; the admin's (system:masters) are exempt.
	if got := c.Flows["service-accounts/workload-low"]; got != 40 {
		t.Errorf("API Priority and Fairness dispatched %d requests of the ServiceAccount's 40 as service-accounts/workload-low; all by flow: %v", got, c.Flows)
	}
	if c.CPU[APIServer] <= 0 {
		t.Errorf("the API server's CPU for 44 writes read %s", c.CPU[APIServer])
	}
	t.Logf("%s; watchers %v; flows %v", Account("known workload", c, Unit{Name: "write", Count: 44}), c.Watchers, c.Flows)
}
