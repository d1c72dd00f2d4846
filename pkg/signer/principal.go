package signer

import "regexp"

// PrincipalAuthSubjectRegex is the regular expression for the argocd-agent principal's
// "--auth mtls:subject:<regex>" (or principal.auth in ConfigMap argocd-agent-params) that
// matches the certificates this signer issues with OCM's default subject for addon. The
// principal runs it against the client certificate's Subject.String() (RFC 2253, CN first);
// the first capture group is the agent name, i.e. the cluster name. The CN must end where the
// expected agent user ends, so a longer CN with the same prefix does not match.
func PrincipalAuthSubjectRegex(addon string) string {
	return "^CN=system:open-cluster-management:cluster:([^:]+):addon:" + regexp.QuoteMeta(addon) +
		":agent:" + regexp.QuoteMeta(AgentName(addon)) + "(?:,|$)"
}
