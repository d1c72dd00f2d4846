package cmd

import (
	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/cmp"
)

// newCMPCommand is the Argo CD Config Management Plugin that delivers a folder of manifests as
// OCM ManifestWorks. Its subcommands and their flags are declared in one place, hence its
// length.
func newCMPCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cmp",
		Short: "Argo CD Config Management Plugin: deliver a folder of manifests to managed clusters as OCM ManifestWorks",
	}
	var dir, clusters, name, namespace, source string
	var maxKiB int
	generate := &cobra.Command{
		Use:   "generate",
		Short: "Print the ManifestWorks for the manifests in a folder (what the plugin's generate step runs)",
		Long: `Reads the folder's manifests and prints one set of ManifestWorks per target cluster, in
the hub namespace named after the cluster. The folder is read as Argo CD reads a source: a
kustomization is built (kustomize build, no plugins, nothing loaded from outside it), a Helm chart
(Chart.yaml) is rendered as helm template --include-crds renders it (hooks left out,
dependencies from its charts/ folder), anything else is read as every .yaml, .yml and .json file
under it (multi-document YAML and Lists included). Run by Argo CD's cmp-server, it takes its
settings from the Application's plugin environment: ARGOCD_ENV_CLUSTERS (comma-separated cluster
names), ARGOCD_ENV_WORK_NAME (default: the Application's name), ARGOCD_ENV_NAMESPACE (default
namespace for namespaced objects without one; the Helm release namespace), ARGOCD_ENV_SOURCE_TYPE
(Directory, Kustomize or Helm: overrides the detection), ARGOCD_ENV_HELM_RELEASE_NAME (default:
the Application's name), ARGOCD_ENV_HELM_VALUES (comma-separated values files inside the chart
folder), ARGOCD_ENV_HELM_SET (a=b,c=d) and ARGOCD_ENV_HELM_KUBE_VERSION (default: Argo CD's
KUBE_VERSION). Flags override them.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts := cmp.OptionsFromEnv(nil)
			if clusters != "" {
				opts.Clusters = cmp.SplitClusters(clusters)
			}
			if name != "" {
				opts.Name = name
			}
			if namespace != "" {
				opts.Namespace = namespace
			}
			if source != "" {
				opts.Source = cmp.SourceType(source)
			}
			opts.MaxWorkBytes = maxKiB * 1024
			out, err := cmp.Generate(dir, opts)
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(out)
			return err
		},
	}
	generate.Flags().StringVar(&dir, "dir", ".", "Source folder: manifests, a kustomization or a Helm chart (Argo CD runs the plugin in the Application's source folder).")
	generate.Flags().StringVar(&clusters, "clusters", "", "Comma-separated managed cluster names; overrides ARGOCD_ENV_CLUSTERS.")
	generate.Flags().StringVar(&name, "name", "", "ManifestWork base name; overrides ARGOCD_ENV_WORK_NAME and the Application's name.")
	generate.Flags().StringVar(&namespace, "namespace", "", "Namespace for namespaced objects that name none; overrides ARGOCD_ENV_NAMESPACE.")
	generate.Flags().StringVar(&source, "source-type", "", "Directory, Kustomize or Helm; overrides ARGOCD_ENV_SOURCE_TYPE and the detection.")
	generate.Flags().IntVar(&maxKiB, "max-work-kib", cmp.DefaultMaxWorkBytes/1024, "Manifests per ManifestWork, in KiB; more are split over several works (OCM refuses works over 500 KiB).")
	health := &cobra.Command{
		Use:   "health-check",
		Short: "Print the argocd-cm entry that gives ManifestWorks an Argo CD health (Lua)",
		Long: `Argo CD has no health check for OCM's ManifestWork, so a plugin Application reads Healthy
whatever the clusters report. The chart adds the printed entry to argocd-cm (cmp.healthCheck.install,
see install-health-check); print it to add it yourself where argocd-cm is kept by another tool. A
ManifestWork is then Degraded when OCM's work agent could not apply an object (with its message) or
a workload failed (a Deployment past its progress deadline, a failed Job), Progressing until every
object exists and every Deployment, StatefulSet, DaemonSet and Job the plugin delivered is ready,
as the work agent evaluates the readiness rules the plugin gives them, and Healthy then.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			out, err := yaml.Marshal(map[string]string{cmp.HealthCheckKey: cmp.HealthCheck()})
			if err != nil {
				return err
			}
			_, err = c.OutOrStdout().Write(out)
			return err
		},
	}
	var binary string
	config := &cobra.Command{
		Use:   "plugin-config",
		Short: "Print the plugin.yaml (ConfigManagementPlugin) for the repo-server sidecar",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := c.OutOrStdout().Write([]byte(cmp.PluginConfig(binary)))
			return err
		},
	}
	config.Flags().StringVar(&binary, "binary", "/argocd-agent-addon", "Path of this executable in the sidecar image.")
	var side cmp.Sidecar
	var remove bool
	var kubeconfig string
	sidecar := &cobra.Command{
		Use:   "install-sidecar",
		Short: "Add the plugin sidecar to Argo CD's repo-server Deployment (or, with --remove, take it out)",
		Long: `Adds one container (this image running Argo CD's argocd-cmp-server with the plugin.yaml of
--config-map) and its two volumes to the repo-server Deployment, by server-side apply with its
own field manager: the rest of the Deployment stays its owner's, a second run changes nothing,
and --remove takes back exactly what was added. The chart runs it as a Helm hook.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return side.Apply(c.Context(), dyn, !remove)
		},
	}
	sf := sidecar.Flags()
	sf.StringVar(&kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG or the in-cluster config.")
	sf.StringVar(&side.Namespace, "namespace", "argocd", "Argo CD's namespace.")
	sf.StringVar(&side.Deployment, "deployment", "argocd-repo-server", "The repo-server Deployment.")
	sf.StringVar(&side.Image, "image", "", "This project's image, run as the sidecar.")
	sf.StringVar(&side.ConfigMap, "config-map", "", "The ConfigMap holding plugin.yaml.")
	sf.BoolVar(&remove, "remove", false, "Take the sidecar out again.")
	var entry cmp.HealthCheckEntry
	var removeEntry bool
	var entryKubeconfig string
	healthEntry := &cobra.Command{
		Use:   "install-health-check",
		Short: "Add the ManifestWork health check to Argo CD's argocd-cm (or, with --remove, take it out)",
		Long: `Writes the entry health-check prints into Argo CD's settings ConfigMap by server-side apply
with its own field manager: the other keys stay their owners', a second run changes nothing, an
older copy of the entry is replaced, and --remove takes the entry out again. Argo CD reads it
without a restart. The chart runs it as a Helm hook.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := restConfig(entryKubeconfig)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return entry.Apply(c.Context(), dyn, !removeEntry)
		},
	}
	hf := healthEntry.Flags()
	hf.StringVar(&entryKubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty uses $KUBECONFIG or the in-cluster config.")
	hf.StringVar(&entry.Namespace, "namespace", "argocd", "Argo CD's namespace.")
	hf.StringVar(&entry.ConfigMap, "config-map", "argocd-cm", "Argo CD's settings ConfigMap.")
	hf.BoolVar(&removeEntry, "remove", false, "Take the entry out again.")
	c.AddCommand(generate, config, health, sidecar, healthEntry)
	return c
}
