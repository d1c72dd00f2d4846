package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// apiConditions returns the string constants of apis/v1alpha1 whose names start with
// Condition or Reason (condition types and reasons), name to value.
func apiConditions(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "apis", "v1alpha1")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Condition") && !strings.HasPrefix(name.Name, "Reason") {
						continue
					}
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal", filepath.Base(f), name.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[name.Name] = v
				}
			}
		}
	}
	return out
}

// TestTroubleshootingCoversConditions: every condition type and reason declared in
// apis/v1alpha1 (constants named Condition* and Reason*) appears, as `code`, in
// docs/troubleshooting.md, so a new reason cannot ship without a line saying what to do.
func TestTroubleshootingCoversConditions(t *testing.T) {
	consts := apiConditions(t)
	for _, must := range []string{"ConditionReady", "ReasonPlacementNotFound", "ConditionEnforced"} {
		if _, ok := consts[must]; !ok {
			t.Fatalf("apis/v1alpha1 declares no %s: the constant parser is broken", must)
		}
	}
	documented := map[string]bool{}
	for _, span := range readPage(t, filepath.Join(testenv.RepoRoot(), "docs", "troubleshooting.md")).codeSpans() {
		documented[span.text] = true
	}
	names := make([]string, 0, len(consts))
	for n := range consts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !documented[consts[n]] {
			t.Errorf("docs/troubleshooting.md does not mention `%s` (apis/v1alpha1.%s)", consts[n], n)
		}
	}
	t.Logf("%d condition types and reasons checked", len(names))
}
