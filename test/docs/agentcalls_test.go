package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestAgentCallsTableIsTheCodes: docs/compatibility.md's table of the agent's Kubernetes calls
// per release is the one pkg/addon makes from the list the template's RBAC tests check.
func TestAgentCallsTableIsTheCodes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := addon.AgentCallsTable()
	header, _, _ := strings.Cut(want, "\n")
	doc := string(raw)
	at := strings.Index(doc, header+"\n")
	if at < 0 {
		t.Fatalf("docs/compatibility.md has no table with the header %q; the table is:\n%s", header, want)
	}
	var got []string
	for _, line := range strings.Split(doc[at:], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n")+"\n" != want {
		t.Errorf("docs/compatibility.md's table of the agent's calls differs from pkg/addon's AgentCallRows; it is:\n%s", want)
	}
}
