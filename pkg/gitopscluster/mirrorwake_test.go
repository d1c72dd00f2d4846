package gitopscluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/addon"
	"github.com/argocd-agent-addon/argocd-agent-addon/test/poll"
)

// A ManagedClusterImageRegistry changes only the cluster's image-registries annotation: that
// alone wakes the GitOpsClusters selecting the cluster, whose components config then follows
// the mirrors within seconds, and their removal gives the cluster the shared config back.
func TestImageMirrorsChangeAloneWakesTheGitOpsCluster(t *testing.T) {
	const ns, cluster = "mirror-wake", "mw-c1"
	goc := fleetOfOne(t, ns, cluster)
	reportProbe(t, cluster, goc)
	createComponentsMCA(t, cluster)
	conditionIs(t, ns, "fleet", v1alpha1.ConditionAddOnConfigured, metav1.ConditionTrue, v1alpha1.ReasonAddOnApplied)
	eventually(t, "the cluster without mirrors names no config of its own", func() error {
		if cfg, err := componentsDeploymentConfig(cluster); err != nil || cfg != "" {
			return fmt.Errorf("names %q (%v)", cfg, err)
		}
		return nil
	})
	// Well under any pass the GitOpsCluster would run on its own.
	const within = 10 * time.Second

	setImageRegistries(t, cluster, `{"registries":[{"source":"quay.io/argoproj","mirror":"mirror.example.com/argoproj"}]}`)
	var cfg string
	poll.Until(t, "the cluster's components addon names a mirrored config", within, func() (err error) {
		if cfg, err = componentsDeploymentConfig(cluster); err == nil && cfg == "" {
			err = fmt.Errorf("no config of its own")
		}
		return err
	})
	name := strings.TrimPrefix(cfg, ns+"/")
	if got := adcVariables(t, ns, name)[addon.VarArgoCDImage]; !strings.HasPrefix(got, "mirror.example.com/argoproj/") {
		t.Errorf("the cluster's config runs Argo CD from %s", got)
	}

	setImageRegistries(t, cluster, `{"registries":[]}`)
	poll.Until(t, "the mirrors gone, the cluster's components addon names no config of its own", within, func() error {
		if c, err := componentsDeploymentConfig(cluster); err != nil || c != "" {
			return fmt.Errorf("names %q (%v)", c, err)
		}
		return nil
	})
}
