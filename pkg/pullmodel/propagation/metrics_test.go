package propagation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDeliveriesCountEveryOutcome: a delivery and a refusal each add one to their series.
func TestDeliveriesCountEveryOutcome(t *testing.T) {
	delivered := deliveries.WithLabelValues(ResultDelivered, ReasonDelivered)
	refused := deliveries.WithLabelValues(ResultRefused, ReasonTooLarge)
	d0, r0 := testutil.ToFloat64(delivered), testutil.ToFloat64(refused)
	countDelivered()
	countRefused(ReasonTooLarge)
	if d, r := testutil.ToFloat64(delivered)-d0, testutil.ToFloat64(refused)-r0; d != 1 || r != 1 {
		t.Errorf("delivered +%v, refused +%v; want +1 each", d, r)
	}
}

// TestEveryRefusalReasonHasASeries: each reason constant a Refusal is built with in this
// package's code is listed in refusalReasons, so its series exists from the start and a
// dashboard's rate() of it exists before it happens.
func TestEveryRefusalReasonHasASeries(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	listed := map[string]bool{}
	type use struct {
		name string
		at   token.Pos
	}
	var used []use
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				// var refusalReasons = []string{...}
				if len(n.Names) == 1 && n.Names[0].Name == "refusalReasons" && len(n.Values) == 1 {
					if lit, ok := n.Values[0].(*ast.CompositeLit); ok {
						for _, e := range lit.Elts {
							if id, ok := e.(*ast.Ident); ok {
								listed[id.Name] = true
							}
						}
					}
				}
			case *ast.CompositeLit:
				if typ, ok := n.Type.(*ast.Ident); !ok || typ.Name != "Refusal" || len(n.Elts) == 0 {
					return true
				}
				first := n.Elts[0]
				if kv, ok := first.(*ast.KeyValueExpr); ok {
					first = kv.Value
				}
				if id, ok := first.(*ast.Ident); ok {
					used = append(used, use{id.Name, n.Pos()})
				}
			}
			return true
		})
	}
	if len(listed) != len(refusalReasons) || len(used) < len(refusalReasons) {
		t.Fatalf("read %d listed reasons of %d and %d refusals: the test no longer reads the code right", len(listed), len(refusalReasons), len(used))
	}
	for _, u := range used {
		if !listed[u.name] {
			t.Errorf("%s: refusal reason %s is not in refusalReasons", fset.Position(u.at), u.name)
		}
	}
}
