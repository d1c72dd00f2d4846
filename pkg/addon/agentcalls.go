package addon

import (
	"fmt"
	"slices"
	"strings"
)

// The Kubernetes API calls argocd-agent's agent makes on its cluster, per supported release,
// read from argocd-agent's source: what the agent template's RBAC must grant, and nothing more.
// The tests of the template (here and in pkg/gitopscluster) and the table of docs/compatibility.md
// ("Kubernetes calls per component and release") are all made from this one list.

// AgentNamespace stands, in an AgentCall, for the namespace the agent runs in.
const AgentNamespace = "<agent namespace>"

// AgentCallReleases are the releases the calls were read for, oldest first.
var AgentCallReleases = []string{"v0.9.0", "v0.10.0"}

// AgentCall is one Kubernetes API request the agent makes.
type AgentCall struct {
	// Path is the code path that makes it; Source the file (or, where no one file makes it,
	// the folder) of argocd-agent's source it is in.
	Path, Source string
	Verb, Group  string
	// Resource may name a subresource ("pods/exec").
	Resource string
	// Namespace is "" for a cluster-wide call, AgentNamespace for the agent's own; the spoke
	// cluster is named "cluster1". Name is "" for a call on no one object.
	Namespace, Name string
	// Modes are the agent modes that make it; nil is every mode.
	Modes []string
	// Since is the first release that makes it; "" is every release read.
	Since string
	// DestinationMapping: made only with --destination-based-mapping.
	DestinationMapping bool
}

// AgentCallRow is a row of the docs' table: related calls, with the words the table says them in.
type AgentCallRow struct {
	Verbs, Objects, Where string
	// Unread are releases whose source was not read for these calls: the table says so,
	// rather than yes or no, and the tests ask nothing of them there.
	Unread []string
	Calls  []AgentCall
}

// AgentCallRows are the agent's calls as the docs table them.
var AgentCallRows = []AgentCallRow{
	{Verbs: "list, watch", Objects: "Applications in its namespace", Where: "application informer, `agent/agent.go`", Calls: []AgentCall{
		{Path: "application informer", Source: "agent/agent.go", Verb: "list", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace},
		{Path: "application informer", Source: "agent/agent.go", Verb: "watch", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace},
	}},
	{Verbs: "create", Objects: "Applications in its namespace (managed)", Where: "createApplication, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "createApplication", Source: "agent/inbound.go", Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Modes: managedOnly},
	}},
	{Verbs: "update, patch, delete", Objects: "Applications in its namespace", Where: "updateApplication, UpdateOperation, deleteApplication, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "updateApplication", Source: "agent/inbound.go", Verb: "update", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: managedOnly},
		{Path: "updateApplication", Source: "agent/inbound.go", Verb: "patch", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: managedOnly},
		{Path: "deleteApplication", Source: "agent/inbound.go", Verb: "delete", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: managedOnly},
		{Path: "hub-requested delete", Source: "agent/inbound.go", Verb: "delete", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: autonomousOnly},
		{Path: "UpdateOperation", Source: "agent/inbound.go", Verb: "update", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: autonomousOnly},
		{Path: "UpdateOperation", Source: "agent/inbound.go", Verb: "patch", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: autonomousOnly},
	}},
	{Verbs: "update", Objects: "an existing Application it adopts (managed)", Where: "adoption, `agent/inbound.go` (#987); not with the policy the addon sets", Calls: []AgentCall{
		// With the policy the addon sets (never) it is not made, but an Application's own
		// annotation may still ask for it.
		{Path: "adoption of an existing Application", Source: "agent/inbound.go", Verb: "update", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace, Name: "guestbook", Modes: managedOnly, Since: "v0.10.0"},
	}},
	{Verbs: "get", Objects: "Applications in the namespace named after the agent, cluster-wide (managed)", Where: "resync on every reconnect, `internal/resync/resync.go`", Calls: []AgentCall{
		{Path: "resync on reconnect", Source: "internal/resync/resync.go", Verb: "get", Group: "argoproj.io", Resource: "applications", Namespace: "cluster1", Name: "guestbook", Modes: managedOnly},
	}},
	{Verbs: "list, watch; get", Objects: "Applications in every namespace", Where: "with destination-based mapping: application informer and populateSourceCache, `agent/agent.go`; resync, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "application informer over every namespace", Source: "agent/agent.go", Verb: "list", Group: "argoproj.io", Resource: "applications", DestinationMapping: true},
		{Path: "application informer over every namespace", Source: "agent/agent.go", Verb: "watch", Group: "argoproj.io", Resource: "applications", DestinationMapping: true},
		{Path: "populateSourceCache", Source: "agent/agent.go", Verb: "list", Group: "argoproj.io", Resource: "applications", DestinationMapping: true},
		{Path: "resync of an Application from another hub namespace", Source: "agent/inbound.go", Verb: "get", Group: "argoproj.io", Resource: "applications", Namespace: "team-a", Name: "guestbook", DestinationMapping: true},
	}},
	{Verbs: "list, watch; create, delete", Objects: "AppProjects in its namespace (create and delete managed only)", Where: "appproject informer, processIncomingAppProject, `agent/agent.go`, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "appproject informer", Source: "agent/agent.go", Verb: "watch", Group: "argoproj.io", Resource: "appprojects", Namespace: AgentNamespace},
		{Path: "appproject informer", Source: "agent/agent.go", Verb: "list", Group: "argoproj.io", Resource: "appprojects", Namespace: AgentNamespace, Since: "v0.10.0"},
		{Path: "processIncomingAppProject", Source: "agent/inbound.go", Verb: "create", Group: "argoproj.io", Resource: "appprojects", Namespace: AgentNamespace, Modes: managedOnly},
		{Path: "processIncomingAppProject", Source: "agent/inbound.go", Verb: "delete", Group: "argoproj.io", Resource: "appprojects", Namespace: AgentNamespace, Name: "default", Modes: managedOnly},
	}},
	{Verbs: "list, watch; get", Objects: "Secrets in its namespace; `argocd-agent-ca`", Where: "repository informer, `agent/agent.go`; root CA, `cmd/argocd-agent/agent.go`", Calls: []AgentCall{
		{Path: "repository informer", Source: "agent/agent.go", Verb: "list", Resource: "secrets", Namespace: AgentNamespace},
		{Path: "repository informer", Source: "agent/agent.go", Verb: "watch", Resource: "secrets", Namespace: AgentNamespace, Modes: managedOnly},
		{Path: "root CA secret", Source: "cmd/argocd-agent/agent.go", Verb: "get", Resource: "secrets", Namespace: AgentNamespace, Name: "argocd-agent-ca"},
	}},
	{Verbs: "create, update", Objects: "repository Secrets (managed)", Where: "processIncomingRepository, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "processIncomingRepository", Source: "agent/inbound.go", Verb: "create", Resource: "secrets", Namespace: AgentNamespace, Modes: managedOnly},
		{Path: "processIncomingRepository", Source: "agent/inbound.go", Verb: "update", Resource: "secrets", Namespace: AgentNamespace, Name: "repo-1", Modes: managedOnly},
	}},
	{Verbs: "create", Objects: "the GPG keys ConfigMap (managed)", Where: "processIncomingGPGKey, `agent/inbound.go`", Calls: []AgentCall{
		{Path: "processIncomingGPGKey", Source: "agent/inbound.go", Verb: "create", Resource: "configmaps", Namespace: AgentNamespace, Modes: managedOnly},
	}},
	{Verbs: "list, watch", Objects: "ConfigMaps in its namespace", Where: "GPG-key informer (the informers the informer-sync-timeout flag waits for), `agent/`", Unread: []string{"v0.9.0"}, Calls: []AgentCall{
		{Path: "GPG-key informer", Source: "agent/", Verb: "list", Resource: "configmaps", Namespace: AgentNamespace, Since: "v0.10.0"},
		{Path: "GPG-key informer", Source: "agent/", Verb: "watch", Resource: "configmaps", Namespace: AgentNamespace, Since: "v0.10.0"},
	}},
	{Verbs: "create", Objects: "Events in its namespace", Where: "event recorder, `agent/`", Calls: []AgentCall{
		{Path: "event recorder", Source: "agent/", Verb: "create", Resource: "events", Namespace: AgentNamespace},
	}},
	{Verbs: "list, watch", Objects: "Namespaces", Where: "namespace informer, `agent/agent.go`", Calls: []AgentCall{
		{Path: "namespace informer", Source: "agent/agent.go", Verb: "list", Resource: "namespaces"},
		{Path: "namespace informer", Source: "agent/agent.go", Verb: "watch", Resource: "namespaces"},
	}},
	{Verbs: "get; list", Objects: "any object an Application manages; Events", Where: "resource proxy, `agent/resource.go`", Calls: []AgentCall{
		{Path: "resource proxy: live object of an Application", Source: "agent/resource.go", Verb: "get", Group: "apps", Resource: "deployments", Namespace: "guestbook", Name: "guestbook-ui"},
		{Path: "resource proxy: events", Source: "agent/resource.go", Verb: "list", Resource: "events", Namespace: "guestbook"},
	}},
}

var (
	managedOnly    = []string{ModeManaged}
	autonomousOnly = []string{ModeAutonomous}
)

// MadeIn reports whether release's agent, in mode and with destination-based mapping or not,
// makes the call.
func (c AgentCall) MadeIn(release, mode string, destination bool) bool {
	if c.DestinationMapping && !destination || c.Modes != nil && !slices.Contains(c.Modes, mode) {
		return false
	}
	return c.Since == "" || releaseIndex(release) >= releaseIndex(c.Since)
}

func releaseIndex(release string) int {
	i := slices.Index(AgentCallReleases, release)
	if i < 0 {
		panic(fmt.Sprintf("no agent calls were read for argocd-agent %s", release))
	}
	return i
}

// AgentCalls are the calls of release's agent in mode, with destination-based mapping or not.
func AgentCalls(release, mode string, destination bool) []AgentCall {
	var out []AgentCall
	for _, row := range AgentCallRows {
		for _, c := range row.Calls {
			if c.MadeIn(release, mode, destination) {
				out = append(out, c)
			}
		}
	}
	return out
}

// AgentMustNot are calls the agent does not make in mode (with destination-based mapping or
// not) in any release read, which argocd-agent's own manifests grant or a wider rule would:
// the template must refuse them.
func AgentMustNot(mode string, destination bool) []AgentCall {
	switch {
	case destination:
		return []AgentCall{
			{Path: "namespace creation (only with --create-namespace, not set)", Verb: "create", Resource: "namespaces"},
			{Path: "applications in other namespaces (only with --allowed-namespaces, not set)", Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: "team-a"},
			{Path: "applications in other namespaces (only with --allowed-namespaces, not set)", Verb: "update", Group: "argoproj.io", Resource: "applications", Namespace: "team-a", Name: "guestbook"},
			{Path: "applications in other namespaces (only with --allowed-namespaces, not set)", Verb: "delete", Group: "argoproj.io", Resource: "applications", Namespace: "team-a", Name: "guestbook"},
		}
	case mode == ModeManaged:
		return []AgentCall{
			{Path: "namespace creation", Verb: "create", Resource: "namespaces"},
			{Path: "applications of every namespace (destination-based mapping only)", Verb: "list", Group: "argoproj.io", Resource: "applications"},
			{Path: "applications of every namespace (destination-based mapping only)", Verb: "watch", Group: "argoproj.io", Resource: "applications"},
			{Path: "secrets of other namespaces", Verb: "list", Resource: "secrets", Namespace: "kube-system"},
			{Path: "applications outside its namespace", Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: "cluster1"},
			{Path: "writes through the resource proxy", Verb: "delete", Group: "apps", Resource: "deployments", Namespace: "guestbook", Name: "guestbook-ui"},
			{Path: "a shell in a pod (web terminal, not enabled)", Verb: "create", Resource: "pods/exec", Namespace: "guestbook", Name: "guestbook-ui"},
		}
	default:
		return []AgentCall{
			{Path: "incoming creates are discarded", Verb: "create", Group: "argoproj.io", Resource: "applications", Namespace: AgentNamespace},
			{Path: "incoming creates are discarded", Verb: "create", Group: "argoproj.io", Resource: "appprojects", Namespace: AgentNamespace},
			{Path: "incoming creates are discarded", Verb: "create", Resource: "secrets", Namespace: AgentNamespace},
			{Path: "namespace creation", Verb: "create", Resource: "namespaces"},
			{Path: "secrets of other namespaces", Verb: "list", Resource: "secrets", Namespace: "kube-system"},
		}
	}
}

// AgentCallsTable is the docs' markdown table of the agent's calls, a column per release read.
func AgentCallsTable() string {
	var b strings.Builder
	b.WriteString("| verbs | objects | where |")
	sep := "| --- | --- | --- |"
	for _, r := range AgentCallReleases {
		b.WriteString(" " + r + " |")
		sep += " --- |"
	}
	b.WriteString("\n" + sep + "\n")
	for _, row := range AgentCallRows {
		fmt.Fprintf(&b, "| %s | %s | %s |", row.Verbs, row.Objects, row.Where)
		for _, r := range AgentCallReleases {
			b.WriteString(" " + row.made(r) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// made is the row's cell for release: yes when some call of the row is made in some mode.
func (row AgentCallRow) made(release string) string {
	if slices.Contains(row.Unread, release) {
		return "not read"
	}
	for _, c := range row.Calls {
		for _, mode := range []string{ModeManaged, ModeAutonomous} {
			if c.MadeIn(release, mode, true) {
				return "yes"
			}
		}
	}
	return "no"
}
