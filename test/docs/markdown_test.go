package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// page is one Markdown file of the documentation.
type page struct {
	// rel is the path from the repository root, with slashes.
	rel   string
	lines []string
}

// pages returns README.md and docs/*.md. A missing docs/ folder or an empty one fails the
// test: the checks would otherwise pass on nothing.
func pages(t *testing.T) []page {
	t.Helper()
	root := testenv.RepoRoot()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	sort.Strings(docs)
	var out []page
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		out = append(out, readPage(t, path))
	}
	return out
}

func readPage(t *testing.T, path string) page {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(testenv.RepoRoot(), path)
	if err != nil {
		t.Fatal(err)
	}
	return page{rel: filepath.ToSlash(rel), lines: strings.Split(string(data), "\n")}
}

// block is a fenced code block: its info string (```yaml gives "yaml") and its lines.
type block struct {
	info  string
	start int // 1-based line of the opening fence
	lines []string
}

// textLine is a line outside fenced code blocks.
type textLine struct {
	n    int // 1-based
	text string
}

// split separates a page into its fenced code blocks and the lines outside them. A fence is a
// line whose first non-blank characters are ``` (indented fences inside list items count).
func (p page) split() (blocks []block, text []textLine) {
	var cur *block
	for i, l := range p.lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &block{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), start: i + 1}
			} else {
				blocks = append(blocks, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, l)
			continue
		}
		text = append(text, textLine{n: i + 1, text: l})
	}
	return blocks, text
}

// codeSpan is an inline code span; it may run over a line break, as in a wrapped paragraph.
var codeSpan = regexp.MustCompile("`+[^`]*`+")

// prose is the page with the lines of fenced code blocks emptied, so that line numbers stay.
func (p page) prose() string {
	_, text := p.split()
	lines := make([]string, len(p.lines))
	for _, l := range text {
		lines[l.n-1] = l.text
	}
	return strings.Join(lines, "\n")
}

// codeSpans returns the inline code spans of the page's prose, without their backticks, each
// with the line it starts on; a span over a line break has the break turned into a space.
func (p page) codeSpans() []textLine {
	prose := p.prose()
	var out []textLine
	for _, m := range codeSpan.FindAllStringIndex(prose, -1) {
		code := strings.ReplaceAll(strings.Trim(prose[m[0]:m[1]], "`"), "\n", " ")
		out = append(out, textLine{n: 1 + strings.Count(prose[:m[0]], "\n"), text: code})
	}
	return out
}

// proseWithoutCode is the page's prose with inline code blanked (line breaks kept), so that a
// link written as code is not taken for a link.
func (p page) proseWithoutCode() []string {
	blanked := codeSpan.ReplaceAllStringFunc(p.prose(), func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	return strings.Split(blanked, "\n")
}

var heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)

// anchors returns the fragment identifiers GitHub gives the headings of a page: the heading
// text in lower case, inline markup and punctuation other than '-' and '_' removed, spaces
// turned into '-', and "-1", "-2", ... added to repeats.
func (p page) anchors() map[string]bool {
	_, text := p.split()
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range text {
		m := heading.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

var markdownLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

func slugify(h string) string {
	h = markdownLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"Revoking a compromised cluster: AgentRevocation":        "revoking-a-compromised-cluster-agentrevocation",
		"Coming from argocd-pull-integration's basic pull model": "coming-from-argocd-pull-integrations-basic-pull-model",
		"The local fleet: `make demo` and `make test`":           "the-local-fleet-make-demo-and-make-test",
		"Clusters in `status.unavailableClusters`":               "clusters-in-statusunavailableclusters",
	} {
		if got := slugify(in); got != want {
			t.Errorf("slugify(%q) = %q, want %q", in, got, want)
		}
	}
}
