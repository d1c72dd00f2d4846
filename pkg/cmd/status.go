package cmd

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/status"
)

// newStatusCommand prints the fleet's state as the hub sees it. Installed on the PATH as
// kubectl-argocd_agent_addon (a link or a copy of the binary), it also runs as
// `kubectl argocd-agent-addon status`.
func newStatusCommand() *cobra.Command {
	var kubeconfig, kubeContext string
	opts := status.Options{AddonName: config.Default().AddonName}
	all := false
	c := &cobra.Command{
		Use:   "status",
		Short: "Print each GitOpsCluster with its clusters, agents, certificates and what is not ready",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := hubConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			scheme, err := manager.NewScheme()
			if err != nil {
				return err
			}
			cl, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			if all {
				opts.Namespace = ""
			}
			opts.Now = time.Now()
			return status.Print(c.Context(), cl, c.OutOrStdout(), opts)
		},
	}
	fs := c.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to the hub's kubeconfig; empty uses $KUBECONFIG, ~/.kube/config or the in-cluster config.")
	fs.StringVar(&kubeContext, "context", "", "The kubeconfig context of the hub; empty uses the current context.")
	fs.StringVarP(&opts.Namespace, "namespace", "n", "", "Only the GitOpsClusters of this namespace (default: all namespaces).")
	fs.BoolVarP(&all, "all-namespaces", "A", false, "GitOpsClusters of all namespaces (the default).")
	fs.StringVar(&opts.AddonName, "addon-name", opts.AddonName, "The agents' ClusterManagementAddOn (the manager's --addon-name).")
	fs.IntVar(&opts.MaxClusters, "max-clusters", 50, "Cluster rows per GitOpsCluster (0: all); the counts cover every cluster.")
	return c
}

// hubConfig loads the hub's client config as kubectl does (--kubeconfig, else $KUBECONFIG,
// else ~/.kube/config; --context, else the current one), else the in-cluster config. When
// none is found it says how to point the command at a hub.
func hubConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err == nil {
		return cfg, nil
	}
	if kubeconfig != "" {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	if kubeContext != "" || !clientcmd.IsEmptyConfig(err) {
		return nil, err
	}
	if in, inErr := rest.InClusterConfig(); inErr == nil {
		return in, nil
	}
	return nil, errors.New("no kubeconfig found for the hub: pass --kubeconfig <path to the hub's kubeconfig> (and --context <its context> when it holds several), or set KUBECONFIG; " +
		"as a kubectl plugin, kubectl's own --kubeconfig and --context are not passed on, so give them after the command: kubectl argocd-agent-addon status --context <hub>")
}
