package docs

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// inlineLink matches [text](target) and ![alt](target), with an optional "title".
var inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// links returns the targets of the inline links of a page, outside code, with their lines.
func (p page) links() []textLine {
	var out []textLine
	for i, l := range p.proseWithoutCode() {
		for _, m := range inlineLink.FindAllStringSubmatch(l, -1) {
			out = append(out, textLine{n: i + 1, text: m[1]})
		}
	}
	return out
}

// TestRelativeLinksResolve: every relative link of README.md and docs/*.md names a file or
// folder of the repository, and a #fragment names a heading of the Markdown page it points to
// (or of the page itself, for a link that is only a fragment). Links with a scheme
// (https:, mailto:) are not followed.
func TestRelativeLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	anchorsOf := map[string]map[string]bool{}
	anchors := func(rel string) map[string]bool {
		if a, ok := anchorsOf[rel]; ok {
			return a
		}
		a := readPage(t, filepath.Join(root, filepath.FromSlash(rel))).anchors()
		anchorsOf[rel] = a
		return a
	}
	checked := 0
	for _, p := range pages(t) {
		for _, l := range p.links() {
			u, err := url.Parse(l.text)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", p.rel, l.n, l.text, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue
			}
			checked++
			target := p.rel
			if u.Path != "" {
				if strings.HasPrefix(u.Path, "/") {
					t.Errorf("%s:%d: link %q is absolute; write it relative to the page", p.rel, l.n, l.text)
					continue
				}
				target = path.Clean(path.Join(path.Dir(p.rel), u.Path))
				if target == ".." || strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", p.rel, l.n, l.text)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", p.rel, l.n, l.text, target)
					continue
				}
			}
			if u.Fragment == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q has a fragment but %s is not a Markdown page", p.rel, l.n, l.text, target)
				continue
			}
			if !anchors(target)[u.Fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", p.rel, l.n, l.text, target, u.Fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the link parser is broken")
	}
	t.Logf("%d relative links checked", checked)
}
