package cmd

import (
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/manager"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/status"
)

// newStatusCommand prints the fleet's state as the hub sees it. Installed on the PATH as
// kubectl-argocd_agent_addon (a link or a copy of the binary), it also runs as
// `kubectl argocd-agent-addon status`.
func newStatusCommand() *cobra.Command {
	var kubeconfig string
	opts := status.Options{AddonName: config.Default().AddonName}
	all := false
	c := &cobra.Command{
		Use:   "status",
		Short: "Print each GitOpsCluster with its clusters, agents, certificates and what is not ready",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := restConfig(kubeconfig)
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
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to the hub's kubeconfig; empty uses $KUBECONFIG or the in-cluster config.")
	fs.StringVarP(&opts.Namespace, "namespace", "n", "", "Only the GitOpsClusters of this namespace (default: all namespaces).")
	fs.BoolVarP(&all, "all-namespaces", "A", false, "GitOpsClusters of all namespaces (the default).")
	fs.StringVar(&opts.AddonName, "addon-name", opts.AddonName, "The agents' ClusterManagementAddOn (the manager's --addon-name).")
	fs.IntVar(&opts.MaxClusters, "max-clusters", 50, "Cluster rows per GitOpsCluster (0: all); the counts cover every cluster.")
	return c
}
