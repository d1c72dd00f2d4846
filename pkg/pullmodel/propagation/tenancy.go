package propagation

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/gobwas/glob"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
)

// Reasons an Application is not authorized for delivery.
const (
	ReasonNamespaceNotAllowed      = "NamespaceNotAllowed"
	ReasonAgentNamespace           = "AgentNamespace"
	ReasonAgentCopy                = "AgentCopy"
	ReasonClusterNotBound          = "ClusterNotBound"
	ReasonProjectNotFound          = "ProjectNotFound"
	ReasonProjectForbids           = "ProjectForbids"
	ReasonSpokeNamespaceNotAllowed = "SpokeNamespaceNotAllowed"
	ReasonWorkNameTaken            = "WorkNameTaken"
	ReasonSpokeNameTaken           = "SpokeNameTaken"
	ReasonSpokePlaceChanged        = "SpokePlaceChanged"
	ReasonOperationNotAllowed      = "OperationNotAllowed"
)

// AnnotationAgentSourceUID is the annotation argocd-agent puts on every Application it copies
// between principal and agent (manager.SourceUIDAnnotation in argocd-agent v0.9.0).
const AnnotationAgentSourceUID = "argocd.argoproj.io/source-uid"

// Policy is the hub operator's word on what the pull model may deliver.
type Policy struct {
	// ArgoCDNamespace is the hub Argo CD's namespace, where the AppProjects are.
	ArgoCDNamespace string
	// SourceNamespaces are the hub namespaces whose Applications may be delivered; empty
	// means the hub Argo CD namespace only.
	SourceNamespaces []string
	// SpokeNamespace is the Argo CD namespace on the managed clusters: delivered
	// Applications land there, whatever their hub namespace. A cluster's
	// LabelSpokeNamespace overrides it for that cluster (ForCluster).
	SpokeNamespace string
}

// DefaultPolicy delivers Applications of the hub Argo CD namespace only, into the spoke's
// namespace of the same name.
func DefaultPolicy() Policy {
	return Policy{ArgoCDNamespace: pullmodel.DefaultArgoCDNamespace, SpokeNamespace: pullmodel.DefaultArgoCDNamespace}
}

// Sources are the hub namespaces whose Applications may be delivered.
func (p Policy) Sources() []string {
	if len(p.SourceNamespaces) == 0 {
		return []string{p.ArgoCDNamespace}
	}
	return p.SourceNamespaces
}

// Validate reports settings the manager must not start with.
func (p Policy) Validate() error {
	if p.ArgoCDNamespace == "" || p.SpokeNamespace == "" {
		return fmt.Errorf("the pull model needs the hub and spoke Argo CD namespaces")
	}
	return nil
}

// Facts are what the authorization of one Application reads from the hub, all from caches.
type Facts struct {
	// Cluster is the target ManagedCluster, nil when it does not exist.
	Cluster *clusterv1.ManagedCluster
	// SourceIsCluster: the Application's namespace is a ManagedCluster's name.
	SourceIsCluster bool
	// Bindings are the ManagedClusterSetBindings in the Application's namespace, each with
	// its ManagedClusterSet (nil when the set does not exist).
	Bindings []Binding
	// Project is the hub AppProject the Application names, nil when it does not exist.
	Project *unstructured.Unstructured
}

// Binding is a ManagedClusterSetBinding and the set it binds.
type Binding struct {
	Binding *clusterv1beta2.ManagedClusterSetBinding
	Set     *clusterv1beta2.ManagedClusterSet
}

// Authorize returns why the Application may not be delivered to its cluster, or nil when
// every rule holds: the operator allows its namespace, the namespace is not an agent's, the
// cluster is accepted and bound to the namespace by a ManagedClusterSetBinding, and the hub
// AppProject admits the namespace, the repositories and the destination on the spoke.
func Authorize(p Policy, app *unstructured.Unstructured, f Facts) *Refusal {
	ns := app.GetNamespace()
	if f.SourceIsCluster {
		return &Refusal{ReasonAgentNamespace, fmt.Sprintf("namespace %q is a managed cluster's namespace, where argocd-agent's principal keeps that cluster's Applications; the pull model never delivers from it", ns)}
	}
	if _, ok := pullmodel.LookupAnnotation(app, AnnotationAgentSourceUID); ok {
		return &Refusal{ReasonAgentCopy, fmt.Sprintf("the Application carries argocd-agent's annotation %s: it is a copy argocd-agent made, not a hub Application to deliver", AnnotationAgentSourceUID)}
	}
	if !slices.Contains(p.Sources(), ns) {
		return &Refusal{ReasonNamespaceNotAllowed, fmt.Sprintf("namespace %q is not one the hub operator allowed for the pull model (allowed: %s; the manager's --pull-model-namespaces, chart value pullModel.namespaces)", ns, strings.Join(p.Sources(), ", "))}
	}
	if ref := checkCluster(app, f.Cluster); ref != nil {
		return ref
	}
	if ref := checkBound(app, f.Cluster, f.Bindings); ref != nil {
		return ref
	}
	p, ref := p.ForCluster(f.Cluster)
	if ref != nil {
		return ref
	}
	if ref := checkSpokeNamespace(p, app); ref != nil {
		return ref
	}
	if ref := checkHubItself(p, app, f.Cluster); ref != nil {
		return ref
	}
	if ref := checkOperation(app); ref != nil {
		return ref
	}
	return checkProject(p, app, f.Project)
}

// checkBound refuses a cluster that no ManagedClusterSet bound to the Application's namespace
// contains. Membership counts through the set label, which OCM lets only those allowed to join
// the set write, or through a set that selects every cluster (OCM's global set). A set that
// selects by other labels is not counted: a cluster's own identity may write its labels.
func checkBound(app *unstructured.Unstructured, cluster *clusterv1.ManagedCluster, bindings []Binding) *Refusal {
	var labelSets []string
	for _, b := range bindings {
		if b.Set == nil || b.Set.DeletionTimestamp != nil || b.Binding.DeletionTimestamp != nil {
			continue
		}
		sel := b.Set.Spec.ClusterSelector
		switch sel.SelectorType {
		case "", clusterv1beta2.ExclusiveClusterSetLabel:
			if cluster.Labels[clusterv1beta2.ClusterSetLabel] == b.Set.Name {
				return nil
			}
		case clusterv1beta2.LabelSelector:
			if sel.LabelSelector != nil && len(sel.LabelSelector.MatchLabels) == 0 && len(sel.LabelSelector.MatchExpressions) == 0 {
				return nil
			}
			labelSets = append(labelSets, b.Set.Name)
		}
	}
	msg := fmt.Sprintf("managed cluster %q is in no ManagedClusterSet bound to namespace %q; a hub admin binds a set containing it with a ManagedClusterSetBinding in that namespace", cluster.Name, app.GetNamespace())
	if len(labelSets) > 0 {
		msg += fmt.Sprintf(" (sets %s select clusters by labels, which a cluster may write on itself, and are not counted)", strings.Join(labelSets, ", "))
	}
	return &Refusal{ReasonClusterNotBound, msg}
}

// checkSpokeNamespace refuses an Application that asks for a spoke namespace other than the
// one the operator configured for its cluster.
func checkSpokeNamespace(p Policy, app *unstructured.Unstructured) *Refusal {
	asked := strings.TrimSpace(pullmodel.Annotation(app, pullmodel.AnnotationAppNamespace))
	if asked == "" || asked == p.SpokeNamespace {
		return nil
	}
	return &Refusal{ReasonSpokeNamespaceNotAllowed, fmt.Sprintf("annotation %s asks for namespace %q on the cluster; Applications land only in the cluster's Argo CD namespace %q, which the hub admin sets (--pull-model-spoke-namespace, or the cluster's label %s): remove the annotation",
		pullmodel.AnnotationAppNamespace, asked, p.SpokeNamespace, LabelSpokeNamespace)}
}

// checkOperation refuses a sync request that Argo CD's API would accept only from someone
// with the override right: one with inline manifests. The spoke's application-controller runs
// whatever operation it finds and never asks for that right, and the pull model does not go
// through Argo CD's API, so the hub refuses it here. The repositories an operation names are
// checked with the spec's (repoURLs).
func checkOperation(app *unstructured.Unstructured) *Refusal {
	manifests, _, _ := unstructured.NestedSlice(app.Object, "operation", "sync", "manifests")
	if len(manifests) == 0 {
		return nil
	}
	return &Refusal{ReasonOperationNotAllowed, "the Application's sync operation carries inline manifests (operation.sync.manifests), which Argo CD accepts only through its API from someone with the override right; the pull model never delivers them. Remove .operation from the Application (kubectl patch --type json -p '[{\"op\":\"remove\",\"path\":\"/operation\"}]') and sync from Git"}
}

// checkProject refuses an Application whose hub AppProject is missing or does not admit its
// namespace, its repositories (those of its spec and of its sync operation) or its destination
// on the spoke, read as Argo CD reads them. The default project is for Applications of the hub
// Argo CD namespace only: it is never delivered (every Argo CD has its own), so for another
// namespace the hub would check its own default while the cluster enforces a different one.
func checkProject(p Policy, app *unstructured.Unstructured, project *unstructured.Unstructured) *Refusal {
	name := pullmodel.ProjectOf(app)
	if name == pullmodel.DefaultProject && app.GetNamespace() != p.ArgoCDNamespace {
		return &Refusal{ReasonProjectForbids, fmt.Sprintf("the default AppProject serves only Applications of the hub Argo CD namespace %q: each cluster enforces its own default project, not the hub's, so an Application of namespace %q must name an AppProject the hub admin made for it", p.ArgoCDNamespace, app.GetNamespace())}
	}
	if project == nil {
		return &Refusal{ReasonProjectNotFound, fmt.Sprintf("AppProject %q does not exist in the hub Argo CD namespace %q; create it there (it decides what the Application may deploy)", name, p.ArgoCDNamespace)}
	}
	spec, _ := project.Object["spec"].(map[string]any)
	if ns := app.GetNamespace(); ns != p.ArgoCDNamespace && !anyMatches(stringList(spec["sourceNamespaces"]), ns) {
		return &Refusal{ReasonProjectForbids, fmt.Sprintf("AppProject %q does not list namespace %q in spec.sourceNamespaces", name, ns)}
	}
	repos := repoURLs(app)
	if len(repos) == 0 {
		return &Refusal{ReasonProjectForbids, "the Application names no source repository"}
	}
	for _, repo := range repos {
		if !repoPermitted(stringList(spec["sourceRepos"]), repo.url) {
			return &Refusal{ReasonProjectForbids, fmt.Sprintf("AppProject %q does not permit repository %q of %s (spec.sourceRepos)", name, repo.url, repo.field)}
		}
	}
	if only, _ := spec["permitOnlyProjectScopedClusters"].(bool); only {
		return &Refusal{ReasonProjectForbids, fmt.Sprintf("AppProject %q sets permitOnlyProjectScopedClusters; the clusters a delivered Application deploys to are its own, never the project's, so the pull model does not deliver for such a project", name)}
	}
	dest := spokeDestination(app)
	if !destinationPermitted(spec["destinations"], dest) {
		return &Refusal{ReasonProjectForbids, fmt.Sprintf("AppProject %q does not permit destination %s on the cluster (spec.destinations)", name, dest)}
	}
	return nil
}

type destination struct{ server, name, namespace string }

func (d destination) String() string {
	where := d.server
	if where == "" {
		where = "name " + d.name
	}
	return fmt.Sprintf("%s, namespace %q", where, d.namespace)
}

// spokeDestination is where the spoke's Argo CD deploys the delivered Application.
func spokeDestination(app *unstructured.Unstructured) destination {
	d := destination{}
	if _, ok := app.Object["spec"].(map[string]any); !ok {
		// The spoke Application has no destination at all (SpokeApplication): none is permitted.
		return d
	}
	d.name, d.server = spokeCluster(app)
	d.namespace, _, _ = unstructured.NestedString(app.Object, "spec", "destination", "namespace")
	if d.server == "" && d.name == "in-cluster" {
		d.server = pullmodel.InClusterServer
	}
	return d
}

// repoRef is a repository an Application names, and the field that names it.
type repoRef struct{ field, url string }

// repoURLs are the repositories an Application reads: its source, its sources, its source
// hydrator's dry and sync sources, and those its sync operation names (the spoke syncs an
// operation's own source instead of the spec's).
func repoURLs(app *unstructured.Unstructured) []repoRef {
	var out []repoRef
	single := func(path ...string) {
		if u, _, _ := unstructured.NestedString(app.Object, append(path, "repoURL")...); u != "" {
			out = append(out, repoRef{strings.Join(path, ".") + ".repoURL", u})
		}
	}
	list := func(path ...string) {
		sources, _, _ := unstructured.NestedSlice(app.Object, path...)
		for i, s := range sources {
			if m, ok := s.(map[string]any); ok {
				if u, _ := m["repoURL"].(string); u != "" {
					out = append(out, repoRef{fmt.Sprintf("%s[%d].repoURL", strings.Join(path, "."), i), u})
				}
			}
		}
	}
	single("spec", "source")
	list("spec", "sources")
	single("spec", "sourceHydrator", "drySource")
	single("spec", "sourceHydrator", "syncSource")
	single("operation", "sync", "source")
	list("operation", "sync", "sources")
	return out
}

// repoPermitted: some pattern admits the repository and no "!" pattern denies it, compared as
// Argo CD compares them: both normalized, and "*" in an allowing pattern not crossing a "/".
// A denying pattern is matched with "*" crossing "/", and against the URL as written too,
// which denies at least what Argo CD denies. A URL with "." or ".." path segments, written out
// or percent-encoded, or with an encoded "/" or any backslash, is refused outright: a Git
// client resolves them, a pattern does not.
func repoPermitted(patterns []string, repo string) bool {
	norm := normalizeRepo(repo)
	if norm == "" || hasDotSegment(norm) || hasEncodedSeparator(norm) {
		return false
	}
	allowed := false
	for _, p := range patterns {
		if deny, ok := strings.CutPrefix(p, "!"); ok {
			d := normalizeRepo(deny)
			if match(deny, repo) || (d != "" && match(d, norm)) {
				return false
			}
			continue
		}
		if p == "*" {
			allowed = true
			continue
		}
		if n := normalizeRepo(p); n != "" {
			allowed = allowed || matchSegments(n, norm)
		}
	}
	return allowed
}

// normalizeRepo is a repository URL in the form Argo CD compares (its NormalizeGitURL): lower
// case, scp-like SSH addresses as ssh:// URLs, without ".git" or a trailing slash; "" when it
// does not parse.
func normalizeRepo(u string) string {
	u = strings.ToLower(strings.TrimSpace(u))
	if !strings.Contains(u, "://") {
		// user@host:path, the scp-like form of an SSH address.
		if at, colon := strings.Index(u, "@"), strings.Index(u, ":"); at > 0 && colon > at {
			u = "ssh://" + u[:colon] + "/" + strings.TrimPrefix(u[colon+1:], "/")
		}
	}
	u = strings.TrimSuffix(u, ".git")
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(parsed.String(), "/")
}

// hasDotSegment reports a "." or ".." path segment, each segment decoded first: "%2e%2e" is
// ".." to a Git client.
func hasDotSegment(u string) bool {
	for _, seg := range strings.Split(u, "/") {
		if dec, err := url.PathUnescape(seg); err != nil || dec == "." || dec == ".." || seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// hasEncodedSeparator reports an encoded "/", "." or backslash, or a backslash, anywhere in
// the URL (u is lower case). No repository needs them, and each can hide a path step from a
// pattern.
func hasEncodedSeparator(u string) bool {
	return strings.Contains(u, "%2f") || strings.Contains(u, "%5c") || strings.Contains(u, "%2e") || strings.Contains(u, `\`)
}

// matchSegments is match with "/" as a separator: "*" stays within one path segment.
func matchSegments(pattern, value string) bool {
	if pattern == value {
		return true
	}
	g, err := glob.Compile(pattern, '/')
	return err == nil && g.Match(value)
}

// destinationPermitted: some entry admits the destination, and every entry with a "!" pattern
// admits it too (stricter than or equal to Argo CD's reading of deny entries: when in doubt
// the Application is not delivered).
func destinationPermitted(raw any, d destination) bool {
	entries, _ := raw.([]any)
	allowed := false
	for _, e := range entries {
		m, _ := e.(map[string]any)
		server, _ := m["server"].(string)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		ok := ((d.server != "" && server != "" && matchField(server, d.server)) || (d.name != "" && name != "" && matchField(name, d.name))) &&
			matchField(ns, d.namespace)
		negated := strings.HasPrefix(server, "!") || strings.HasPrefix(name, "!") || strings.HasPrefix(ns, "!")
		if negated && !ok {
			return false
		}
		allowed = allowed || ok
	}
	return allowed
}

func matchField(pattern, value string) bool {
	if deny, ok := strings.CutPrefix(pattern, "!"); ok {
		return !match(deny, value)
	}
	return match(pattern, value)
}

func anyMatches(patterns []string, value string) bool {
	for _, p := range patterns {
		if match(p, value) {
			return true
		}
	}
	return false
}

// match is Argo CD's glob match (gobwas/glob without separators: "*" matches any run of
// characters). A pattern that does not compile, or a regular expression (/.../), matches
// nothing.
func match(pattern, value string) bool {
	if pattern == value {
		return true
	}
	if len(pattern) > 1 && strings.HasPrefix(pattern, "/") && strings.HasSuffix(pattern, "/") {
		return false
	}
	g, err := glob.Compile(pattern)
	return err == nil && g.Match(value)
}

// stringList reads a list of strings from an unstructured field.
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
