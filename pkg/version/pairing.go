package version

import (
	"slices"
	"strings"
)

// Pair is an argocd-agent release and the Argo CD release it is built against. argocd-agent
// drives the spoke's own Argo CD through Argo CD's Go API and CRDs, so the two move together:
// the Argo CD components the addon installs on the spokes (pkg/spoke, generated from every
// paired Argo CD release by hack/spoke-manifests) must be the pair of the agent that runs there.
type Pair struct {
	// Agent is the argocd-agent release as its image is tagged ("v0.10.0").
	Agent string
	// ArgoCD is the github.com/argoproj/argo-cd/v3 version its go.mod requires ("v3.5.0").
	ArgoCD string
}

// pairs are the supported pairs, the default first. Where each Argo CD version comes from
// (argoproj-labs/argocd-agent; docs/compatibility.md cites them):
//   - v0.10.0: PR #1069 moved go.mod from Argo CD v3.4.4 to v3.5.0 on 2026-08-11, fifteen days
//     before the release; no later move before 2026-08-26 is known.
//   - v0.9.0: PR #970 moved it from v3.3.9 to v3.4.3 two days before the release; the next
//     move (#1023, v3.4.4) came after it.
//
// Adding a pair: add it here, run `make manifests` (the components of its Argo CD release are
// generated beside the others) and add its column to docs/compatibility.md.
var pairs = [...]Pair{
	{Agent: "v0.10.0", ArgoCD: "v3.5.0"},
	{Agent: "v0.9.0", ArgoCD: "v3.4.3"},
}

// The default pair: the agents' image when neither a GitOpsCluster nor its principal names one,
// and the Argo CD components of an agent whose version is not known.
const (
	ArgoCDAgentVersion = "v0.10.0"
	ArgoCDVersion      = "v3.5.0"
)

// DefaultAgentImage is the argocd-agent image of ArgoCDAgentVersion.
const DefaultAgentImage = "quay.io/argoprojlabs/argocd-agent:" + ArgoCDAgentVersion

// Pairs returns the supported pairs, the default first.
func Pairs() []Pair { return slices.Clone(pairs[:]) }

// Default is the default pair.
func Default() Pair { return Pair{Agent: ArgoCDAgentVersion, ArgoCD: ArgoCDVersion} }

// ArgoCDVersions are the paired Argo CD releases, each once, the default's first: the
// components the binary carries.
func ArgoCDVersions() []string {
	var out []string
	for _, p := range pairs {
		if !slices.Contains(out, p.ArgoCD) {
			out = append(out, p.ArgoCD)
		}
	}
	return out
}

// PairOf returns the pair of an argocd-agent release, given as its image tag ("v0.10.0") or as
// the version string the agent and principal report ("0.10.0"). Matching is exact, as
// argocd-agent's own handshake is: a patch release is another release.
func PairOf(agentVersion string) (Pair, bool) {
	if agentVersion == "" {
		return Pair{}, false
	}
	if !strings.HasPrefix(agentVersion, "v") {
		agentVersion = "v" + agentVersion
	}
	for _, p := range pairs {
		if p.Agent == agentVersion {
			return p, true
		}
	}
	return Pair{}, false
}

// PairOfImage returns the pair of the argocd-agent release an image runs, by its tag; the
// registry and repository do not matter, so a mirror's copy is the same release. An image
// named by digest alone, or by a tag that is no supported release ("latest", a build of
// one's own), has none.
func PairOfImage(image string) (Pair, bool) { return PairOf(ImageTag(image)) }

// ComponentsPair is the pair whose Argo CD the components get beside agents running image:
// that image's own when its release is supported (so an explicitly chosen v0.9.0 keeps its
// Argo CD v3.4.3), else the default; known says which, so that the caller can say so.
func ComponentsPair(image string) (p Pair, known bool) {
	if p, ok := PairOfImage(image); ok {
		return p, true
	}
	return Default(), false
}

// ImageTag is the tag of an image reference, "" when it has none (digest only, or untagged).
func ImageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if i := strings.LastIndex(image, ":"); i > slash {
		return image[i+1:]
	}
	return ""
}
