package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/lazylog"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/resourcelist"
)

// newResourceReporterCommand runs on a managed cluster, next to its Argo CD: it writes the
// objects each pull-model Application deploys into an annotation that its ManifestWork feeds
// back to the hub's ApplicationSet report.
func newResourceReporterCommand() *cobra.Command {
	var kubeconfig, healthAddr string
	namespace := pullmodel.DefaultArgoCDNamespace
	zapOpts := zap.Options{}
	c := &cobra.Command{
		Use:   "resource-reporter",
		Short: "On a managed cluster: report the objects of pull-model Applications to the hub",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctrl.SetLogger(lazylog.New(zap.New(zap.UseFlagOptions(&zapOpts))))
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			mgr, err := resourcelist.NewManager(cfg, namespace, healthAddr)
			if err != nil {
				return err
			}
			return mgr.Start(c.Context())
		},
	}
	fs := c.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig for running outside a cluster; empty uses $KUBECONFIG or the in-cluster config.")
	fs.StringVar(&namespace, "namespace", namespace, "The cluster's Argo CD namespace, where the pull model delivers Applications.")
	fs.StringVar(&healthAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints listen on; \"0\" disables them.")
	bindLogFlags(fs, &zapOpts)

	var image string
	manifests := &cobra.Command{
		Use:   "manifests",
		Short: "Print the ServiceAccount, Role, RoleBinding and Deployment that run the reporter on a cluster",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if image == "" {
				return fmt.Errorf("--image is required: this project's image, as the cluster pulls it")
			}
			for i, o := range resourcelist.Objects(namespace, image) {
				raw, err := yaml.Marshal(o)
				if err != nil {
					return err
				}
				if i > 0 {
					fmt.Fprintln(c.OutOrStdout(), "---")
				}
				fmt.Fprint(c.OutOrStdout(), string(raw))
			}
			return nil
		},
	}
	manifests.Flags().StringVar(&image, "image", "", "This project's image, as the managed cluster pulls it (required).")
	manifests.Flags().StringVar(&namespace, "namespace", namespace, "The cluster's Argo CD namespace.")
	c.AddCommand(manifests)
	return c
}
