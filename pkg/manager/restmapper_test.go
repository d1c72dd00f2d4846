package manager

import (
	"fmt"
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// countingMapper counts the RESTMapping calls that reach it.
type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// groupsMapper is a mapper shaped like controller-runtime's dynamic one: one mapper per API
// group, asked in turn.
func groupsMapper(groups int) meta.RESTMapper {
	var multi meta.MultiRESTMapper
	for g := range groups {
		gv := schema.GroupVersion{Group: fmt.Sprintf("group%d.example.com", g), Version: "v1"}
		m := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
		for k := range 5 {
			m.Add(gv.WithKind(fmt.Sprintf("Kind%d", k)), meta.RESTScopeNamespace)
		}
		multi = append(multi, m)
	}
	return meta.PriorityRESTMapper{Delegate: multi}
}

func TestRememberingRESTMapper(t *testing.T) {
	delegate := &countingMapper{RESTMapper: groupsMapper(3)}
	m := &rememberingRESTMapper{RESTMapper: delegate, mappings: map[mappingKey]meta.RESTMapping{}}
	kind := schema.GroupKind{Group: "group1.example.com", Kind: "Kind2"}

	first, err := m.RESTMapping(kind, "v1")
	if err != nil {
		t.Fatal(err)
	}
	first.Resource.Resource = "changed by a caller"
	second, err := m.RESTMapping(kind, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if delegate.calls != 1 {
		t.Errorf("the delegate was asked %d times for one mapping, want 1", delegate.calls)
	}
	if second.Resource.Resource != "kind2s" || second.Scope.Name() != meta.RESTScopeNameNamespace || second.GroupVersionKind.Version != "v1" {
		t.Errorf("remembered mapping %+v, want kind2s, namespaced, v1", second)
	}
	// Another version list is another question.
	if _, err := m.RESTMapping(kind); err != nil || delegate.calls != 2 {
		t.Errorf("without a version: err %v, delegate asked %d times, want 2", err, delegate.calls)
	}
	// A failure is not kept: a kind installed later is found.
	missing := schema.GroupKind{Group: "later.example.com", Kind: "Late"}
	for range 2 {
		if _, err := m.RESTMapping(missing, "v1"); !meta.IsNoMatchError(err) {
			t.Fatalf("missing kind: %v, want a no-match error", err)
		}
	}
	if delegate.calls != 4 {
		t.Errorf("the delegate was asked %d times, want 4 (each failure asked again)", delegate.calls)
	}
}

// BenchmarkIsObjectNamespaced is the question the cache asks for every read when it watches
// only some namespaces, against a mapper of 30 API groups.
func BenchmarkIsObjectNamespaced(b *testing.B) {
	gvk := schema.GroupVersionKind{Group: "group17.example.com", Version: "v1", Kind: "Kind3"}
	for name, m := range map[string]meta.RESTMapper{
		"dynamic":     groupsMapper(30),
		"remembering": &rememberingRESTMapper{RESTMapper: groupsMapper(30), mappings: map[mappingKey]meta.RESTMapping{}},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if namespaced, err := apiutil.IsGVKNamespaced(gvk, m); err != nil || !namespaced {
					b.Fatal(namespaced, err)
				}
			}
		})
	}
}

// TestManagerRemembersMappings: the manager, and every test suite built from the same options,
// gets the remembering mapper.
func TestManagerRemembersMappings(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	provide := ControllerOptions(scheme, DefaultOptions()).MapperProvider
	if provide == nil {
		t.Fatal("the manager's options name no REST mapper")
	}
	m, err := provide(&rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*rememberingRESTMapper); !ok {
		t.Errorf("the manager's REST mapper is a %T", m)
	}
}
