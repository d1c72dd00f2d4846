package manager

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewRESTMapper, the manager's, is controller-runtime's dynamic REST mapper with the mappings it
// finds remembered. With managed namespaces the cache asks, for every read, whether the object's
// kind is namespaced; the dynamic mapper answers from its discovery cache, but by asking each
// API group's mapper in turn and building an error for every group that does not have the
// kind: at 10,000 clusters that was 8 % of everything the manager allocated.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingRESTMapper{RESTMapper: m, mappings: map[mappingKey]meta.RESTMapping{}}, nil
}

// rememberingRESTMapper keeps each mapping its delegate found. A kind's resource and scope
// never change while it exists (a CRD's names and scope are immutable), and the dynamic
// mapper keeps what it discovered anyway; failures are not kept, so a kind that appears
// later (a CRD installed after the manager started) is found as before.
type rememberingRESTMapper struct {
	meta.RESTMapper
	mu       sync.RWMutex
	mappings map[mappingKey]meta.RESTMapping
}

type mappingKey struct {
	kind     schema.GroupKind
	versions string
}

func (m *rememberingRESTMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{kind: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	known, ok := m.mappings[key]
	m.mu.RUnlock()
	if ok {
		// A copy: the caller may change what it is given.
		return &known, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mappings[key] = *mapping
	m.mu.Unlock()
	return mapping, nil
}
