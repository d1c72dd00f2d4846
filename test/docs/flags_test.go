package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// owner says which program a documented flag that is not the manager's belongs to. A flag of
// one of this repository's own programs names it in subcommand (a command path under
// argocd-agent-addon) or goMain (a folder of a main package using the flag package), and is
// checked there too; the others are taken as written.
type owner struct {
	what       string
	subcommand []string
	goMain     string
}

var (
	principal   = owner{what: "argocd-agent's principal"}
	agent       = owner{what: "argocd-agent's agent"}
	helmKubectl = owner{what: "helm, kubectl or clusteradm"}
	// reporterManifests prints the resource reporter's objects (docs/pull-model.md).
	reporterManifests = owner{what: "argocd-agent-addon resource-reporter manifests", subcommand: []string{"resource-reporter", "manifests"}}
)

// otherPrograms lists the flags the pages mention that are not the manager's. Every other
// --flag in code on a page must be a flag of `argocd-agent-addon manager`.
var otherPrograms = map[string][]owner{
	// argocd-agent (docs/install.md, "Running your own principal"; the agents' settings).
	"auth":                          {principal},
	"allowed-namespaces":            {principal, agent},
	"namespace":                     {principal, helmKubectl, reporterManifests},
	"tls-secret-name":               {principal},
	"tls-ca-secret-name":            {principal},
	"resource-proxy-secret-name":    {principal},
	"resource-proxy-ca-secret-name": {principal},
	"jwt-secret-name":               {principal},
	"namespace-create-enable":       {principal},
	"client-cert-subject-match":     {principal},
	"destination-based-mapping":     {principal, agent},
	"ignore-unmanaged-apps":         {agent},
	// Helm, kubectl, clusteradm and the argocd CLI in the pages' commands.
	"create-namespace":    {helmKubectl},
	"set":                 {helmKubectl},
	"overwrite":           {helmKubectl},
	"type":                {helmKubectl},
	"clusterrole":         {helmKubectl},
	"group":               {helmKubectl},
	"include-crds":        {{what: "helm template"}},
	"refresh":             {{what: "argocd app get"}, {what: "the pull-model benchmark", goMain: "test/bench/pullmodel"}},
	"quota-backend-bytes": {{what: "etcd"}},
	// OCM's work agent (docs/pull-model.md, what the raw-JSON feedback gate costs).
	"max-json-raw-length": {{what: "OCM's work agent"}},
	// OCM's addon-manager, given a higher client rate in a components benchmark run.
	"kube-api-qps":   {{what: "OCM's addon-manager"}},
	"kube-api-burst": {{what: "OCM's addon-manager"}},
	// containerd's ctr and crane, importing an image into a real node of the local fleet.
	"address":        {{what: "ctr"}},
	"insecure":       {{what: "crane"}},
	"all":            {helmKubectl},
	"all-namespaces": {helmKubectl},
	"for":            {helmKubectl},
	"timeout":        {helmKubectl, {what: "the components benchmark", goMain: "test/bench/components"}},
	"server-side":    {helmKubectl},
	"field-selector": {helmKubectl},
	// This repository's other programs.
	"image":              {reporterManifests},
	"remove":             {{what: "argocd-agent-addon cmp install-sidecar", subcommand: []string{"cmp", "install-sidecar"}}},
	"clusters":           {{what: "the benchmarks", goMain: "test/bench/fleet"}, {what: "the benchmarks", goMain: "test/bench/pullmodel"}, {what: "the benchmarks", goMain: "test/bench/components"}},
	"idle":               {{what: "the fleet benchmark", goMain: "test/bench/fleet"}, {what: "the pull-model benchmark", goMain: "test/bench/pullmodel"}},
	"apps":               {{what: "the pull-model benchmark", goMain: "test/bench/pullmodel"}},
	"mode":               {{what: "the components benchmark", goMain: "test/bench/components"}},
	"manager":            {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"agents-in-flight":   {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"manager-arg":        {{what: "the benchmarks", goMain: "test/bench/internal/benchkit"}},
	"split-cores":        {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"consistency-checks": {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"profiles":           {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"profile-seconds":    {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"admin":              {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"manager-log":        {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"manager-log-level":  {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"runs":               {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"memory-limit":       {{what: "the fleet benchmark", goMain: "test/bench/fleet"}},
	"direct":             {{what: "the components benchmark", goMain: "test/bench/components"}},
	"etcd-quota":         {{what: "the components benchmark", goMain: "test/bench/components"}},
	"addon-manager-arg":  {{what: "the components benchmark", goMain: "test/bench/components"}},
	"results":            {{what: "the benchmarks", goMain: "test/bench/internal/benchkit"}},
}

// flagToken is a --flag as written in code: two dashes, then a lower-case name.
var flagToken = regexp.MustCompile(`(?:^|[\s(\[=|'"])--([a-z0-9][a-z0-9-]*[a-z0-9])`)

// managerLine is a command line that runs the manager; every flag on it must be the manager's.
var managerLine = regexp.MustCompile(`argocd-agent-addon\s+manager\b`)

type mention struct {
	page string
	line int
	name string
	// onManagerLine: the flag follows `argocd-agent-addon manager` on the same line.
	onManagerLine bool
}

// flagMentions returns the --flags written in inline code spans and fenced code blocks of a page.
func flagMentions(p page) []mention {
	var out []mention
	add := func(n int, code string) {
		cut := -1
		if loc := managerLine.FindStringIndex(code); loc != nil {
			cut = loc[1]
		}
		for _, m := range flagToken.FindAllStringSubmatchIndex(code, -1) {
			out = append(out, mention{page: p.rel, line: n, name: code[m[2]:m[3]], onManagerLine: cut >= 0 && m[2] > cut})
		}
	}
	blocks, _ := p.split()
	for _, b := range blocks {
		for i, l := range b.lines {
			add(b.start+1+i, l)
		}
	}
	for _, span := range p.codeSpans() {
		add(span.n, span.text)
	}
	return out
}

// commandFlags returns a lookup of the flags of the argocd-agent-addon command at path.
func commandFlags(t *testing.T, path ...string) func(name string) bool {
	t.Helper()
	c := cmd.NewRootCommand()
	for _, name := range path {
		var next *cobra.Command
		for _, sub := range c.Commands() {
			if sub.Name() == name {
				next = sub
			}
		}
		if next == nil {
			t.Fatalf("argocd-agent-addon has no command %q", strings.Join(path, " "))
		}
		c = next
	}
	flags := c.Flags()
	return func(name string) bool { return flags.Lookup(name) != nil }
}

// goMainFlag reports whether a main package in dir defines the flag name with the standard
// flag package (flag.String("name", ...), flag.IntVar(&v, "name", ...), flag.Var(v, "name", ...))
// or benchkit's ArgsFlag("name", ...).
func goMainFlag(t *testing.T, dir, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(dir), "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	def := regexp.MustCompile(`(?:flag\.[A-Z][A-Za-z0-9]*|\bArgsFlag)\((?:[^,()]+,\s*)?"` + regexp.QuoteMeta(name) + `"`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if def.Match(data) {
			return true
		}
	}
	return false
}

// TestManagerFlagsExist: every --flag the README and docs/*.md write in code (inline or in a
// code block) is a flag of `argocd-agent-addon manager` (pkg/cmd), unless otherPrograms lists it
// as another program's; a flag written after `argocd-agent-addon manager` on a command line
// must be the manager's in any case. Entries of otherPrograms for this repository's own
// programs are checked against those programs, and an entry no page mentions fails the test,
// so the list cannot hide a renamed manager flag for long.
func TestManagerFlagsExist(t *testing.T) {
	manager := commandFlags(t, "manager")
	if !manager("departure-settle") || !manager("pull-model") || manager("no-such-flag") {
		t.Fatal("the manager's flag set is not the one pkg/cmd registers")
	}
	for name, owners := range otherPrograms {
		for _, o := range owners {
			switch {
			case o.subcommand != nil:
				if !commandFlags(t, o.subcommand...)(name) {
					t.Errorf("otherPrograms: %s has no flag --%s", o.what, name)
				}
			case o.goMain != "":
				if !goMainFlag(t, o.goMain, name) {
					t.Errorf("otherPrograms: %s (%s) defines no flag --%s", o.what, o.goMain, name)
				}
			}
		}
	}

	used := map[string]bool{}
	managerFlags := map[string]bool{}
	for _, p := range pages(t) {
		for _, m := range flagMentions(p) {
			used[m.name] = true
			switch {
			case manager(m.name):
				managerFlags[m.name] = true
			case m.onManagerLine:
				t.Errorf("%s:%d: --%s follows `argocd-agent-addon manager` but is not one of its flags", m.page, m.line, m.name)
			case otherPrograms[m.name] != nil:
			default:
				t.Errorf("%s:%d: --%s is not a flag of `argocd-agent-addon manager` (pkg/cmd/root.go); fix the page, or list it in otherPrograms if it belongs to another program", m.page, m.line, m.name)
			}
		}
	}
	for name := range otherPrograms {
		if !used[name] {
			t.Errorf("otherPrograms lists --%s, which no page mentions any more: remove it", name)
		}
	}
	if len(managerFlags) == 0 {
		t.Fatal("no manager flag found in the pages: the parser is broken")
	}
	names := make([]string, 0, len(managerFlags))
	for n := range managerFlags {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("%d manager flags documented: %s", len(names), strings.Join(names, " "))
}
