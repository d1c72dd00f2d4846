package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestInstallExampleIsUpstreamsReadme: the GitOpsCluster the install steps apply
// (examples/gitopscluster.yaml, which the e2e suite applies on the local fleet) is, comments
// aside, the upstream README's, which this project accepts unchanged.
func TestInstallExampleIsUpstreamsReadme(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "gitopscluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var example, upstream map[string]any
	if err := yaml.Unmarshal(b, &example); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(testenv.ReadmeGitOpsCluster), &upstream); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(example, upstream) {
		t.Errorf("examples/gitopscluster.yaml is not the upstream README's GitOpsCluster:\n%v\nwant\n%v", example, upstream)
	}
}
