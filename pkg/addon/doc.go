// Package addon holds the pure builders for the OCM objects through which the
// hub installs the argocd-agent agent on managed clusters: the
// ClusterManagementAddOn, the AddOnTemplate, the AddOnDeploymentConfig and the
// placement entry that ties them to a Placement.
//
// Builders take a spec and return desired objects; they never talk to an API
// server, so the reconciler can compare the result with what it observes and
// write only differences. Output is deterministic: the same input always gives
// byte-identical manifests, which is what makes "no write when nothing changed"
// and rollout-on-change possible.
//
// Rendering model (OCM template addon): OCM's hub addon-manager replaces every
// {{NAME}} tag in a manifest's raw JSON with a value, without JSON escaping.
// Values that are equal on every cluster travel as ADC customizedVariables;
// per-cluster values come from OCM built-ins (CLUSTER_NAME, INSTALL_NAMESPACE,
// HUB_KUBECONFIG). Everything else is literal text in the template.
package addon
