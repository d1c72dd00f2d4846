// Package config holds the names and lifetimes of the GitOpsCluster reconciler, shared by its
// parts (selection, principal PKI, cluster secrets, revocation, addon objects, readiness).
package config

import (
	"fmt"
	"time"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

// Config holds the names and lifetimes the GitOpsCluster reconciler uses; every name has a manager flag.
type Config struct {
	// AddonName is the ClusterManagementAddOn name shared by all GitOpsClusters.
	AddonName string
	// SignerName is the CustomSigner name of the agents' client certificates.
	SignerName string
	// PrincipalServiceName, ResourceProxyServiceName and PrincipalDeploymentName are the
	// argocd-agent principal objects in the principal namespace.
	PrincipalServiceName     string
	ResourceProxyServiceName string
	ResourceProxyPort        int32
	PrincipalDeploymentName  string
	// DefaultAgentImage is used when neither the spec nor the principal Deployment names one.
	DefaultAgentImage string
	// ReloaderImage is this project's image; it runs the agents' cert-reloader sidecar.
	ReloaderImage string
	// DefaultAgentNamespace is the spoke namespace of the agent when the spec sets none.
	DefaultAgentNamespace string
	// SpokeImageRegistry, when set, replaces the registry of every image run on the managed
	// clusters (agent, cert-reloader, Argo CD, redis): a mirror for private registries and air gaps.
	SpokeImageRegistry string
	// SpokeImagePullSecrets are added to every pod the addon runs on the managed clusters.
	SpokeImagePullSecrets []string
	// Certificate lifetimes.
	CAValidity            time.Duration
	ServerCertValidity    time.Duration
	ClusterSecretValidity time.Duration
	// WriteConcurrency bounds the cluster secrets one reconcile writes at the same time.
	WriteConcurrency int
	// ProbesPerPass bounds the Argo CD probes one pass creates (DefaultProbesPerPass when 0).
	ProbesPerPass int
	// DepartureSettle is how long a cluster must stay out of the selection before its agent is
	// revoked (confirmed then by a live read of every decision): OCM rewrites paged decisions
	// one page at a time, so a cluster may briefly appear in none.
	DepartureSettle time.Duration
	// MaxRevocationPercent is the circuit breaker: a pass that would revoke more than this
	// share of a GitOpsCluster's agents waits for a person's approval. 0 or 100 disables it.
	MaxRevocationPercent int
	// CertManagerRecheck is how often a principal whose PKI cert-manager keeps is looked at
	// while all is well. The manager watches no cert-manager kind (cert-manager may not be
	// installed), so a Certificate that turns not Ready while its Secret stays the same is
	// seen at the next look.
	CertManagerRecheck time.Duration
	// CertManagerAllowedIssuers are cert-manager issuers, "<kind>/<name>" or
	// "<group>/<kind>/<name>", that any GitOpsCluster may name besides an Issuer of its principal
	// namespace. A ClusterIssuer may also allow namespaces itself, with the annotation
	// v1alpha1.AnnotationAllowedGitOpsClusterNamespaces.
	CertManagerAllowedIssuers []string
	// ManagedNamespaces limits the principal namespaces whose Secrets and Deployments the
	// manager reads and writes; empty means all.
	ManagedNamespaces []string
	// Now is the clock; tests replace it.
	Now func() time.Time
	// NewJWTKey makes the principals' JWT signing keys for the reconciler's spare key
	// (pki.SpareKey); nil is pki.NewJWTSigningKey. Tests replace it.
	NewJWTKey func() ([]byte, error)
}

// SecretsCacheLabelled reports whether the manager's cache holds only the project's own
// Secrets (no managed namespaces), so that a Secret it lacks may still exist.
func (c Config) SecretsCacheLabelled() bool { return len(c.ManagedNamespaces) == 0 }

// Default returns names compatible with the upstream argocd-agent addon.
func Default() Config {
	return Config{
		AddonName:                addon.DefaultAddonName,
		SignerName:               addon.DefaultSignerName,
		PrincipalServiceName:     "argocd-agent-principal",
		ResourceProxyServiceName: "argocd-agent-resource-proxy",
		ResourceProxyPort:        9090,
		PrincipalDeploymentName:  "argocd-agent-principal",
		DefaultAgentImage:        version.DefaultAgentImage,
		ReloaderImage:            "argocd-agent-addon:latest",
		DefaultAgentNamespace:    addon.DefaultAgentInstallNamespace,
		CAValidity:               5 * 365 * 24 * time.Hour,
		ServerCertValidity:       365 * 24 * time.Hour,
		ClusterSecretValidity:    DefaultClusterSecretValidity,
		DepartureSettle:          30 * time.Second,
		CertManagerRecheck:       5 * time.Minute,
		WriteConcurrency:         16,
		MaxRevocationPercent:     50,
		Now:                      time.Now,
	}
}

// DefaultProbesPerPass: a new fleet of thousands gets its probes a few hundred per pass, the
// next pass a second later. A pass holds the GitOpsCluster, so creating every probe in
// one (a minute for 10,000 on a 2-core hub) would hold a joining cluster's agent as long; a
// batch holds it about a second.
const DefaultProbesPerPass = 200

// The lifetime of the resource-proxy client certificate in a cluster secret. argocd-agent's
// resource proxy (v0.9.0 and v0.10.0) accepts any certificate of the principal's CA whose CN
// names a connected agent: it consults neither the cluster secret nor the blocklist. A copy of
// the certificate that leaks thus stays usable until it expires whenever its agent is
// connected, so its lifetime is what a leak is worth. It is renewed at two thirds of it.
const (
	DefaultClusterSecretValidity = 7 * 24 * time.Hour
	// MinClusterSecretValidity: shorter, the renewals (two writes per cluster each) would
	// come every few minutes over a whole fleet.
	MinClusterSecretValidity = time.Hour
	MaxClusterSecretValidity = 30 * 24 * time.Hour
)

// Validate rejects settings the reconciler must not start with.
func (c Config) Validate() error {
	if v := c.ClusterSecretValidity; v < MinClusterSecretValidity || v > MaxClusterSecretValidity {
		return fmt.Errorf("--cluster-secret-cert-validity must be between %s and %s, got %s", MinClusterSecretValidity, MaxClusterSecretValidity, v)
	}
	return nil
}

// ComponentsAddonName is the ClusterManagementAddOn that installs the Argo CD components beside
// the agents of addon addonName.
func ComponentsAddonName(addonName string) string { return addonName + "-argocd" }

// NamespaceManaged reports whether the manager may keep secrets in ns.
func (c Config) NamespaceManaged(ns string) bool {
	if len(c.ManagedNamespaces) == 0 {
		return true
	}
	for _, m := range c.ManagedNamespaces {
		if m == ns {
			return true
		}
	}
	return false
}
