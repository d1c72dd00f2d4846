package pulltest

import (
	"net/http"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// PatchAnswers is a client of env that records, for each PATCH it sends, the Accept header:
// what the client asked the API server to answer with.
type PatchAnswers struct {
	client.Client
	mu     sync.Mutex
	accept []string
	next   http.RoundTripper
}

// NewPatchAnswers returns a client of env that records its PATCH requests' Accept headers.
func NewPatchAnswers(t testing.TB, env *testenv.Env) *PatchAnswers {
	t.Helper()
	p := &PatchAnswers{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { p.next = rt; return p })
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	p.Client = c
	return p
}

func (p *PatchAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch {
		p.mu.Lock()
		p.accept = append(p.accept, req.Header.Get("Accept"))
		p.mu.Unlock()
	}
	return p.next.RoundTrip(req)
}

// Accepts returns the Accept headers of the PATCH requests sent so far.
func (p *PatchAnswers) Accepts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.accept...)
}
