package node

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestKubeletKeepsImportedImages: the kubelet's image garbage collection would remove the
// node's imported images (the pause image first) once the machine's disk is 85% used, and
// nothing can pull them back.
func TestKubeletKeepsImportedImages(t *testing.T) {
	n := &Node{opts: Options{Name: "n"}, dir: t.TempDir()}
	issue := func(string, ...string) ([]byte, []byte, error) { return []byte("cert"), []byte("key"), nil }
	if err := n.writeConfig(Control{Server: "https://127.0.0.1:6443", Issue: issue}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(n.dir, "kubelet", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		High *int32 `json:"imageGCHighThresholdPercent"`
		Low  *int32 `json:"imageGCLowThresholdPercent"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	// 100 is the kubelet's highest value: it collects only when the image file system is full.
	if cfg.High == nil || *cfg.High != 100 || cfg.Low == nil || *cfg.Low >= 100 {
		t.Errorf("kubelet image GC thresholds high %v low %v: the kubelet would remove imported images before the disk is full", deref(cfg.High), deref(cfg.Low))
	}
}

func deref(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}
