package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// proofsHeading heads the section of docs/security.md that names, for each "cannot" of its
// table, the tests proving it.
const proofsHeading = `## What proves each "cannot"`

var (
	// anyLink is an inline link: its text and its target.
	anyLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	// testName is a link text naming a Go test function.
	testName = regexp.MustCompile("^`(Test[A-Za-z0-9_]*)`$")
	// sectionEnd is a heading of the section's level or above.
	sectionEnd = regexp.MustCompile(`^#{1,2}\s`)
)

// proofItem is one claim of the section: a list item, its continuation lines joined.
type proofItem struct {
	line int // 1-based line where the item starts
	text string
}

// proofItems returns the list items of the proofs section of p, failing if it has none.
func proofItems(t *testing.T, p page) []proofItem {
	t.Helper()
	_, text := p.split()
	var items []proofItem
	in := false
	for _, l := range text {
		if strings.TrimSpace(l.text) == proofsHeading {
			in = true
			continue
		}
		if !in {
			continue
		}
		if sectionEnd.MatchString(l.text) {
			break
		}
		switch {
		case strings.HasPrefix(l.text, "- "):
			items = append(items, proofItem{line: l.n, text: l.text})
		case len(items) > 0 && strings.HasPrefix(l.text, "  ") && strings.TrimSpace(l.text) != "":
			items[len(items)-1].text += " " + strings.TrimSpace(l.text)
		}
	}
	if !in {
		t.Fatalf("%s has no section %q", p.rel, proofsHeading)
	}
	if len(items) == 0 {
		t.Fatalf("%s: section %q lists no claim: the parser is broken", p.rel, proofsHeading)
	}
	return items
}

// TestSecurityProofsExist: in docs/security.md's section "What proves each \"cannot\"", every
// claim names at least one test, every link names a file that exists, and every test named
// (a link whose text is `TestSomething`) is declared as func TestSomething( in the file its
// link names. A test renamed, moved or deleted thus fails here rather than leaving a claim
// without proof.
func TestSecurityProofsExist(t *testing.T) {
	root := testenv.RepoRoot()
	p := readPage(t, filepath.Join(root, "docs", "security.md"))
	sources := map[string]string{}
	source := func(rel string) string {
		if s, ok := sources[rel]; ok {
			return s
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		sources[rel] = string(data)
		return sources[rel]
	}
	tests := 0
	for _, item := range proofItems(t, p) {
		named := 0
		for _, m := range anyLink.FindAllStringSubmatch(item.text, -1) {
			text, target := m[1], m[2]
			rel := path.Clean(path.Join(path.Dir(p.rel), target))
			if strings.Contains(target, "://") || strings.HasPrefix(target, "/") || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Errorf("%s:%d: link %q does not name a file of the repository", p.rel, item.line, target)
				continue
			}
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", p.rel, item.line, target, rel)
				continue
			}
			name := testName.FindStringSubmatch(text)
			if name == nil {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(rel, "_test.go") {
				t.Errorf("%s:%d: %s links to %s, which is not a Go test file", p.rel, item.line, name[1], rel)
				continue
			}
			decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name[1]) + `\(`)
			if !decl.MatchString(source(rel)) {
				t.Errorf("%s:%d: %s declares no func %s(", p.rel, item.line, rel, name[1])
				continue
			}
			named++
		}
		if named == 0 {
			t.Errorf("%s:%d: the claim names no test that proves it: %s", p.rel, item.line, item.text)
		}
		tests += named
	}
	t.Logf("%d test references checked", tests)
}
