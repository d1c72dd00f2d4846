package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// AgentMode is the argocd-agent operating mode.
// +kubebuilder:validation:Enum=managed;autonomous
type AgentMode string

const (
	// AgentModeManaged makes the hub the source of truth for Applications and AppProjects.
	AgentModeManaged AgentMode = "managed"
	// AgentModeAutonomous makes each managed cluster the source of truth for its Applications.
	AgentModeAutonomous AgentMode = "autonomous"
)

// ArgoCDComponents says who provides the Argo CD components the agent drives on each cluster.
// +kubebuilder:validation:Enum=Install;Existing
type ArgoCDComponents string

const (
	// ArgoCDComponentsInstall installs Argo CD's CRDs, application-controller, repo-server and
	// redis (and the applicationset-controller in autonomous mode) beside the agent, at the Argo
	// CD release the agent is built against.
	ArgoCDComponentsInstall ArgoCDComponents = "Install"
	// ArgoCDComponentsExisting installs only the agent, which uses the Argo CD already running in
	// its namespace on each cluster.
	ArgoCDComponentsExisting ArgoCDComponents = "Existing"
)

// ExistingArgoCD says what the components addon does on a selected cluster where it finds an
// Argo CD it did not install.
// +kubebuilder:validation:Enum=LeaveAlone;Replace
type ExistingArgoCD string

const (
	// ExistingArgoCDLeaveAlone installs nothing of Argo CD's on such a cluster and reports it:
	// the components go only where a probe found no other Argo CD.
	ExistingArgoCDLeaveAlone ExistingArgoCD = "LeaveAlone"
	// ExistingArgoCDReplace installs the components whatever is there: an Argo CD in the
	// install namespace is taken over (its settings replaced, its controllers and CRDs moved to
	// the paired release, and deleted with the addon).
	ExistingArgoCDReplace ExistingArgoCD = "Replace"
)

// UserIDs says who picks the user IDs the pods on the managed clusters run as.
// +kubebuilder:validation:Enum=Auto;Fixed;Assigned
type UserIDs string

const (
	// UserIDsAuto is Assigned for the Argo CD components of a cluster whose OCM product
	// ClusterClaim names OpenShift or a service built on it, and Fixed for everything else (the
	// agent included). The claim is the cluster's own word, and it only chooses between these
	// two for that cluster's own pods.
	UserIDsAuto UserIDs = "Auto"
	// UserIDsFixed runs the agent and redis as UID 999, the user their images are built for.
	UserIDsFixed UserIDs = "Fixed"
	// UserIDsAssigned sets no runAsUser, runAsGroup or fsGroup: the platform assigns them, as
	// OpenShift's restricted-v2 security context constraint does (it refuses pods asking for a
	// UID outside the namespace's range).
	UserIDsAssigned UserIDs = "Assigned"
)

// ApplicationMapping says how argocd-agent's principal picks the agent an Application goes to.
// +kubebuilder:validation:Enum=Namespace;Destination
type ApplicationMapping string

const (
	// ApplicationMappingNamespace routes an Application to the agent named like its hub
	// namespace (argocd-agent's default).
	ApplicationMappingNamespace ApplicationMapping = "Namespace"
	// ApplicationMappingDestination routes an Application to the agent named in its
	// spec.destination.name, whatever its hub namespace (argocd-agent's destination-based
	// mapping), so Applications of one hub namespace, such as an ApplicationSet's, can go to
	// many agents.
	ApplicationMappingDestination ApplicationMapping = "Destination"
)

// PlacementKind is the only kind a placementRef may name.
const PlacementKind = "Placement"

// PlacementReference names an OCM Placement in the GitOpsCluster's own namespace.
type PlacementReference struct {
	// APIVersion of the referenced object, e.g. cluster.open-cluster-management.io/v1beta1.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the referenced object; only Placement is supported.
	// +kubebuilder:default=Placement
	// +kubebuilder:validation:Enum=Placement
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the Placement, looked up in the GitOpsCluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ArgoCDAgentAddonSpec configures the argocd-agent deployed to every selected cluster.
// The principal namespace cannot change: the cluster secrets and certificate records live
// there, and moving would strand them. Delete and re-create the GitOpsCluster to move.
// +kubebuilder:validation:XValidation:rule="!has(self.applicationMapping) || self.applicationMapping != 'Destination' || !has(self.mode) || self.mode == 'managed'",message="applicationMapping Destination needs mode managed: argocd-agent refuses destination-based mapping for autonomous agents"
// +kubebuilder:validation:XValidation:rule="!has(self.argoCDConfig) || self.argoCDComponents != 'Existing'",message="argoCDConfig configures the Argo CD the addon installs: it needs argoCDComponents Install"
// +kubebuilder:validation:XValidation:rule="!has(self.clusterArgoCDConfig) || self.argoCDComponents != 'Existing'",message="clusterArgoCDConfig configures the Argo CD the addon installs: it needs argoCDComponents Install"
// +kubebuilder:validation:XValidation:rule="!has(self.redis) || self.argoCDComponents == 'Existing'",message="redis configures the agent for an Argo CD the addon does not install: it needs argoCDComponents Existing (the addon's own redis is argocd-redis)"
// +kubebuilder:validation:XValidation:rule="has(self.principalNamespace) == has(oldSelf.principalNamespace) && (!has(self.principalNamespace) || self.principalNamespace == oldSelf.principalNamespace)",message="principalNamespace is immutable; delete and re-create the GitOpsCluster to use another principal"
type ArgoCDAgentAddonSpec struct {
	// Mode is the argocd-agent mode: managed (the hub is the source of truth) or autonomous
	// (each managed cluster is).
	// +kubebuilder:default=managed
	// +optional
	Mode AgentMode `json:"mode,omitempty"`

	// PrincipalServerAddress is the host name or IP address agents dial to reach the principal.
	// When empty it is discovered from the principal Service.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="isIP(self) || self.matches('^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?(\\\\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$')",message="principalServerAddress must be a bare host name or IP address, without scheme, port, path or spaces (for example principal.example.com or 192.0.2.10)"
	// +optional
	PrincipalServerAddress string `json:"principalServerAddress,omitempty"`

	// PrincipalServerPort is the port agents dial to reach the principal, 1-65535. A quoted
	// number such as "443" is accepted too. When empty it is discovered with the address.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 65535) : (self.matches('^[0-9]{1,5}$') && int(self) >= 1 && int(self) <= 65535)",message="principalServerPort must be a port number between 1 and 65535"
	// +optional
	PrincipalServerPort *intstr.IntOrString `json:"principalServerPort,omitempty"`

	// AgentNamespace is the namespace on each managed cluster that the agent is installed into.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="agentNamespace must be a DNS label: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
	// +optional
	AgentNamespace string `json:"agentNamespace,omitempty"`

	// Image is the argocd-agent image for the agents. When empty, the image of the principal
	// Deployment is used (argocd-agent rejects agents whose version differs from the
	// principal's), else the manager's default.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains(' ') && !self.contains('\"') && !self.contains('{{')",message="image must be an image reference without spaces, quotes or template tags"
	// +optional
	Image string `json:"image,omitempty"`

	// PrincipalNamespace is the hub namespace of the argocd-agent principal and its PKI secrets.
	// Defaults to the GitOpsCluster's namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="principalNamespace must be a DNS label"
	// +optional
	PrincipalNamespace string `json:"principalNamespace,omitempty"`

	// ArgoCDComponents: Install (the default) installs the Argo CD components the agent needs on
	// every selected cluster, in the agent's namespace; Existing installs only the agent, for
	// clusters that already run Argo CD there. A ManagedCluster labelled
	// argocd-agent-addon.open-cluster-management.io/argocd-components=Existing gets only the agent.
	// +kubebuilder:default=Install
	// +kubebuilder:validation:XValidation:rule="self == 'Install' || self == 'Existing'",message="argoCDComponents must be Install (the addon installs Argo CD beside the agent) or Existing (the cluster's own Argo CD is used)"
	// +optional
	ArgoCDComponents ArgoCDComponents `json:"argoCDComponents,omitempty"`

	// ExistingArgoCD applies with argoCDComponents Install: LeaveAlone (the default) installs
	// the components only on clusters where a probe found no Argo CD the addon did not install
	// (no application-controller, repo-server or argocd-cm in the install namespace, and no
	// Application CRD, which another namespace's Argo CD would share), and lists the others in
	// status.foreignArgoCD; choose Existing for them (the ManagedCluster label or a GitOpsCluster
	// of their own). Replace installs the components everywhere, taking over what is there.
	// +kubebuilder:default=LeaveAlone
	// +optional
	ExistingArgoCD ExistingArgoCD `json:"existingArgoCD,omitempty"`

	// Redis says where the agent finds the redis of the clusters' own Argo CD (argoCDComponents
	// Existing), when it is not Argo CD's default argocd-redis:6379 with the password in Secret
	// argocd-redis, key auth: an Argo CD made by the argocd-operator, say, names them after its
	// ArgoCD object (<name>-redis:6379, Secret <name>-redis-initial-password, key admin.password).
	// +optional
	Redis *RedisEndpoint `json:"redis,omitempty"`

	// ArgoCDConfig sets keys of the Argo CD ConfigMaps the addon installs on every cluster
	// (argoCDComponents Install). The keys given replace the install's; the others stay. Edits
	// made on a cluster are reverted at the next apply: this is where that configuration lives.
	// +optional
	ArgoCDConfig *ArgoCDConfig `json:"argoCDConfig,omitempty"`

	// ClusterArgoCDConfig sets keys for single clusters on top of argoCDConfig: a key given
	// here replaces the GitOpsCluster's for that cluster, sshKnownHosts replaces the whole
	// list. Such a cluster gets an AddOnTemplate of its own, named in its components
	// ManagedClusterAddOn's configs (OCM's per-cluster override); an entry for a cluster this
	// GitOpsCluster does not select is kept but unused, and listed in the AddOnConfigured
	// condition.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=clusterName
	// +optional
	ClusterArgoCDConfig []ClusterArgoCDConfig `json:"clusterArgoCDConfig,omitempty"`

	// NodePlacement puts every pod the addon runs on the clusters (the agent and each Argo CD
	// component, StatefulSet included) on the nodes it selects and tolerates.
	// +optional
	NodePlacement *NodePlacement `json:"nodePlacement,omitempty"`

	// ContainerResources set the resources of containers the addon runs on the clusters, init
	// containers included, by workload and container name; later entries win.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	ContainerResources []ContainerResources `json:"containerResources,omitempty"`

	// UserIDs: Fixed runs the agent and redis as UID 999; Assigned lets the platform assign the
	// UIDs, for OpenShift clusters (restricted-v2); Auto (the default) is Assigned for the Argo CD
	// components of the clusters whose ClusterClaim product.open-cluster-management.io says
	// OpenShift (or OpenShiftDedicated, ROSA, ARO, ROKS) and Fixed otherwise. The agent follows
	// Fixed or Assigned on every cluster (Auto: Fixed), so an OpenShift cluster's agent still
	// needs Assigned, in a GitOpsCluster of its own.
	// +kubebuilder:default=Auto
	// +optional
	UserIDs UserIDs `json:"userIDs,omitempty"`

	// ApplicationMapping says how the principal routes Applications to agents: Namespace (the
	// default) by the hub namespace named after the cluster, Destination by
	// spec.destination.name (managed mode only). Destination turns on the agents'
	// --destination-based-mapping; the principal needs the same flag, which the manager cannot
	// check, and every managed GitOpsCluster of that principal must then say Destination.
	// +kubebuilder:default=Namespace
	// +optional
	ApplicationMapping ApplicationMapping `json:"applicationMapping,omitempty"`

	// RolloutStrategy governs how a change of the agents' configuration rolls across the
	// selected clusters (All by default; Progressive and ProgressivePerGroup pass through to OCM).
	// +optional
	RolloutStrategy *clusterv1alpha1.RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// RestartPrincipalOnCertificateChange restarts the principal Deployment when its serving
	// certificate is re-issued, because argocd-agent reads certificates only at start-up.
	// Defaults to true.
	// +optional
	RestartPrincipalOnCertificateChange *bool `json:"restartPrincipalOnCertificateChange,omitempty"`

	// ClientCertificateValidity is the lifetime of agent client certificates issued by the
	// project's signer; the manager's default applies when empty. Between one hour and 30
	// days: a certificate cannot be recalled from an agent, so a long one keeps a revoked agent
	// connected to a principal without a blocklist for that long.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="clientCertificateValidity must be at least 1h"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('720h')",message="clientCertificateValidity must be at most 720h (30 days)"
	// +optional
	ClientCertificateValidity *metav1.Duration `json:"clientCertificateValidity,omitempty"`

	// CertManager, when set, has cert-manager issue the principal's PKI from the named issuer
	// instead of the CA the manager mints: the agents' signing CA (an intermediate) and the
	// principal's and resource proxy's serving certificates. The setting belongs to the
	// principal namespace: every GitOpsCluster using that namespace must agree, else the
	// younger ones report CertificatesReady=False (PKIConflict) and change nothing.
	// Removing it goes back to the self-managed CA; either way agents stay connected through
	// the overlap of old and new CA in the trust bundle.
	// +optional
	CertManager *CertManagerPKI `json:"certManager,omitempty"`
}

// CertManagerPKI selects the cert-manager issuer of a principal's PKI.
type CertManagerPKI struct {
	// IssuerRef names the cert-manager Issuer (in the principal namespace) or ClusterIssuer
	// that signs the agents' CA and the principal's serving certificates. It must be able to
	// issue CA certificates (a CA or Vault issuer; not ACME).
	// +required
	IssuerRef CertManagerIssuerReference `json:"issuerRef"`
}

// CertManagerIssuerReference names a cert-manager issuer, as a Certificate's issuerRef does.
// +kubebuilder:validation:XValidation:rule="(has(self.group) && self.group != 'cert-manager.io') || !has(self.kind) || self.kind == 'Issuer' || self.kind == 'ClusterIssuer'",message="kind must be Issuer or ClusterIssuer for group cert-manager.io"
type CertManagerIssuerReference struct {
	// Name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// Kind of the issuer: Issuer (namespaced, looked up in the principal namespace) or
	// ClusterIssuer; external issuers name their own kind.
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +optional
	Kind string `json:"kind,omitempty"`

	// Group of the issuer: cert-manager.io, or an external issuer's API group.
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Group string `json:"group,omitempty"`
}

// GitOpsClusterSpec is the desired argocd-agent fleet.
type GitOpsClusterSpec struct {
	// PlacementRef selects the managed clusters that run an agent.
	// +required
	PlacementRef PlacementReference `json:"placementRef"`

	// ArgoCDAgentAddon configures the agents and how they reach the principal.
	// +required
	ArgoCDAgentAddon ArgoCDAgentAddonSpec `json:"argoCDAgentAddon"`

	// RevokedClusters names managed clusters whose agent is cut off while they stay in the
	// Placement: their cluster secret on the principal is deleted, every unexpired certificate
	// issued to them is put on the principal's TLS blocklist, and the signer refuses their
	// certificate requests (reason Revoked). Removing a name undoes it.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	RevokedClusters []string `json:"revokedClusters,omitempty"`
}

// ClusterAgentState tells why one selected cluster's agent is not available.
type ClusterAgentState struct {
	// Name of the managed cluster.
	Name string `json:"name"`
	// Reason is a CamelCase cause.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation.
	// +optional
	Message string `json:"message,omitempty"`
}

// PrincipalSource tells where the principal endpoint came from.
type PrincipalSource string

const (
	// PrincipalSourceSpec means principalServerAddress/Port in the spec.
	PrincipalSourceSpec PrincipalSource = "Spec"
	// PrincipalSourceLoadBalancer means the principal Service's load-balancer ingress.
	PrincipalSourceLoadBalancer PrincipalSource = "LoadBalancer"
	// PrincipalSourceNodePort means a hub node address and the Service's node port.
	PrincipalSourceNodePort PrincipalSource = "NodePort"
)

// PrincipalEndpoint is the address agents dial.
type PrincipalEndpoint struct {
	// Address is a host name or IP address.
	Address string `json:"address"`
	// Port is the TCP port.
	Port int32 `json:"port"`
	// Source is where the endpoint was found.
	Source PrincipalSource `json:"source"`
}

// ArgoCDConfig holds keys of the Argo CD ConfigMaps the addon installs, by ConfigMap.
type ArgoCDConfig struct {
	// ArgoCDCM keys go into argocd-cm: resource.exclusions, timeout.reconciliation, ...
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	ArgoCDCM map[string]string `json:"argocd-cm,omitempty"`
	// ArgoCDCmdParamsCM keys go into argocd-cmd-params-cm: controller.status.processors,
	// reposerver.parallelism.limit, ...
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	ArgoCDCmdParamsCM map[string]string `json:"argocd-cmd-params-cm,omitempty"`
	// ArgoCDRBACCM keys go into argocd-rbac-cm.
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	ArgoCDRBACCM map[string]string `json:"argocd-rbac-cm,omitempty"`
	// ArgoCDTLSCertsCM keys go into argocd-tls-certs-cm: a Git server's host name, its CA
	// certificates in PEM.
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	ArgoCDTLSCertsCM map[string]string `json:"argocd-tls-certs-cm,omitempty"`
	// SSHKnownHosts replaces the install's list of SSH known hosts (argocd-ssh-known-hosts-cm,
	// key ssh_known_hosts): include the hosts of the install's list you still use.
	// +optional
	SSHKnownHosts *string `json:"sshKnownHosts,omitempty"`
}

// ClusterArgoCDConfig is the Argo CD configuration of one cluster, over the GitOpsCluster's.
type ClusterArgoCDConfig struct {
	// ClusterName is the ManagedCluster's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="clusterName must be a ManagedCluster name (a DNS subdomain)"
	ClusterName string `json:"clusterName"`

	ArgoCDConfig `json:",inline"`
}

// NodePlacement selects the nodes of the pods the addon runs on the managed clusters.
type NodePlacement struct {
	// NodeSelector is added to every pod's nodeSelector.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations are added to every pod's tolerations.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// ContainerResources sets the resources of the containers of one workload.
type ContainerResources struct {
	// Workload is the Deployment or StatefulSet: argocd-agent-agent, argocd-application-controller,
	// argocd-repo-server, argocd-redis, argocd-applicationset-controller, or "*" for all.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Workload string `json:"workload"`
	// Container is the container's name, init containers included; "*" or empty for every
	// container of the workload.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Container string `json:"container,omitempty"`
	// Resources replace the container's requests and limits.
	Resources corev1.ResourceRequirements `json:"resources"`
}

// RedisEndpoint is the redis of an Argo CD the addon does not install, in the agent's namespace.
type RedisEndpoint struct {
	// Address is the redis Service's host:port. Default argocd-redis:6379.
	// +kubebuilder:validation:MaxLength=260
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[0-9]{1,5}$')",message="address must be host:port, e.g. example-argocd-redis:6379"
	// +optional
	Address string `json:"address,omitempty"`
	// PasswordSecretName is the Secret in the agent namespace holding the redis password.
	// Default argocd-redis.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="passwordSecretName must be a Secret name"
	// +optional
	PasswordSecretName string `json:"passwordSecretName,omitempty"`
	// PasswordSecretKey is the key of the password in that Secret. Default auth.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="passwordSecretKey must be a Secret key"
	// +optional
	PasswordSecretKey string `json:"passwordSecretKey,omitempty"`
}

// FoundArgoCD is an Argo CD found on a cluster that the components addon did not install.
type FoundArgoCD struct {
	// Cluster is the managed cluster.
	Cluster string `json:"cluster"`
	// Found says what was found, e.g. "StatefulSet argocd/argocd-application-controller
	// (quay.io/argoproj/argocd:v3.6.1)".
	// +kubebuilder:validation:MaxLength=1024
	Found string `json:"found"`
}

// GitOpsClusterStatus is the observed state of the fleet.
type GitOpsClusterStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: PlacementResolved, PrincipalDiscovered, CertificatesReady, AddOnConfigured,
	// AgentsAvailable and the summary Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// SelectedClusters is the number of clusters the Placement selects.
	// +optional
	SelectedClusters int32 `json:"selectedClusters,omitempty"`

	// AvailableAgents is the number of selected clusters whose agent is available.
	// +optional
	AvailableAgents int32 `json:"availableAgents,omitempty"`

	// UnavailableClusters lists up to ten selected clusters whose agent is not available.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	UnavailableClusters []ClusterAgentState `json:"unavailableClusters,omitempty"`

	// Principal is the endpoint handed to the agents.
	// +optional
	Principal *PrincipalEndpoint `json:"principal,omitempty"`

	// AddOnTemplate is the name of the AddOnTemplate this GitOpsCluster owns.
	// +optional
	AddOnTemplate string `json:"addOnTemplate,omitempty"`

	// AgentsOnOtherVersion is the number of selected clusters whose agent runs another version
	// than the principal, which argocd-agent refuses: the image tag of the AddOnDeploymentConfig
	// OCM last applied on the cluster, against the tag of the principal Deployment's image (of the
	// GitOpsCluster's agent image when the principal does not run on this hub). It falls to zero
	// as a version change rolls out.
	// +optional
	AgentsOnOtherVersion int32 `json:"agentsOnOtherVersion,omitempty"`

	// ExistingArgoCDClusters is the number of selected clusters that keep their own Argo CD
	// (labelled argocd-agent-addon.open-cluster-management.io/argocd-components=Existing) while
	// the GitOpsCluster installs the components on the others.
	// +optional
	ExistingArgoCDClusters int32 `json:"existingArgoCDClusters,omitempty"`

	// ForeignArgoCDClusters is the number of selected clusters where the components were not
	// installed because an Argo CD the addon did not install was found there (existingArgoCD
	// LeaveAlone).
	// +optional
	ForeignArgoCDClusters int32 `json:"foreignArgoCDClusters,omitempty"`

	// ForeignArgoCD lists up to twenty of them, with what was found.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	ForeignArgoCD []FoundArgoCD `json:"foreignArgoCD,omitempty"`

	// OtherArgoCDVersionClusters is the number of selected clusters that keep their own Argo CD
	// (argoCDComponents Existing, the opt-out label, or one left alone) whose
	// application-controller runs another release than the one the agent is built against:
	// argocd-agent follows Argo CD's types and behaviour of that release, and a skew may break it.
	// +optional
	OtherArgoCDVersionClusters int32 `json:"otherArgoCDVersionClusters,omitempty"`

	// OtherArgoCDVersions lists up to twenty of them, with the release found.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	OtherArgoCDVersions []FoundArgoCD `json:"otherArgoCDVersions,omitempty"`

	// ProbingClusters is the number of selected clusters whose probe has not reported yet; the
	// components wait for it.
	// +optional
	ProbingClusters int32 `json:"probingClusters,omitempty"`

	// RevokedAgents is the number of clusters in spec.revokedClusters whose agent is revoked.
	// +optional
	RevokedAgents int32 `json:"revokedAgents,omitempty"`

	// PendingDepartures is the number of clusters that left the selection and whose agents
	// are revoked once the departure is confirmed (or a person approves a paused revocation).
	// +optional
	PendingDepartures int32 `json:"pendingDepartures,omitempty"`

	// AddOnDeploymentConfig is the name of the current AddOnDeploymentConfig (same namespace);
	// its name changes with its content, so a rollout can tell old from new.
	// +optional
	AddOnDeploymentConfig string `json:"addOnDeploymentConfig,omitempty"`
}

// GitOpsCluster turns an OCM Placement into a fleet of argocd-agents.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="argocd-agent-addon.open-cluster-management.io/crd-revision=3"
// +kubebuilder:resource:shortName=gitopscluster;goc
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.argoCDAgentAddon.mode`
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placementRef.name`
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selectedClusters`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableAgents`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GitOpsCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GitOpsClusterSpec `json:"spec"`
	// +optional
	Status GitOpsClusterStatus `json:"status,omitempty"`
}

// GitOpsClusterList is a list of GitOpsClusters.
// +kubebuilder:object:root=true
type GitOpsClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GitOpsCluster `json:"items"`
}
