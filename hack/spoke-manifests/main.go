// Command spoke-manifests writes the Argo CD objects the addon installs on managed clusters into
// pkg/spoke/upstream/<release>: one directory per Argo CD release that a supported argocd-agent
// release is paired with (version.Pairs), one compact JSON file per object, taken unchanged from
// manifests/core-install.yaml of the github.com/argoproj/argo-cd/v3 module at that release
// (Argo CD's "core" install: CRDs, application-controller, repo-server, redis,
// applicationset-controller, their RBAC and config, without API server, UI, Dex or
// notifications). The module zips come from the Go module proxy through `go mod download`, so
// the files are what each release ships, never hand-edited. pkg/spoke adapts them (namespace,
// images, RBAC names) when it builds the AddOnTemplate.
//
//	go run ./hack/spoke-manifests [--out pkg/spoke/upstream]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/version"
)

const (
	module = "github.com/argoproj/argo-cd/v3"
	source = "manifests/core-install.yaml"
)

func main() {
	out := flag.String("out", "pkg/spoke/upstream", "directory to write the objects to, one subdirectory per release (everything else in it is removed)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "spoke-manifests:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	releases := version.ArgoCDVersions()
	for _, release := range releases {
		if err := writeRelease(filepath.Join(out, release), release); err != nil {
			return fmt.Errorf("the components of Argo CD %s: %w", release, err)
		}
	}
	// A release no longer paired, and the single-release layout of earlier versions, go: the
	// binary embeds every directory here.
	entries, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() && slices.Contains(releases, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// writeRelease writes the objects of one Argo CD release into out, replacing its *.json files.
func writeRelease(out, release string) error {
	dir, err := moduleDir(module + "@" + release)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, source))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	objs, err := decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(out, "*.json"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		name := strings.ToLower(o.GetKind()) + "_" + o.GetName() + ".json"
		if seen[name] {
			return fmt.Errorf("%s holds two objects named %s", source, name)
		}
		seen[name] = true
		raw, err := compact(o)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, name), raw, 0o644); err != nil {
			return err
		}
	}
	origin := fmt.Sprintf("%s@%s %s\n", module, release, source)
	return os.WriteFile(filepath.Join(out, "SOURCE"), []byte(origin), 0o644)
}

// moduleDir downloads the module zip (or finds it in the module cache) and returns its directory.
func moduleDir(modVersion string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", modVersion)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", modVersion, err, stderr.String(), raw)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(raw, &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", modVersion, info.Error)
	}
	return info.Dir, nil
}

func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		m := map[string]any{}
		if err := utilyaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	sort.SliceStable(objs, func(i, j int) bool {
		if objs[i].GetKind() != objs[j].GetKind() {
			return objs[i].GetKind() < objs[j].GetKind()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	return objs, nil
}

// compact is the object as JSON without insignificant white space, keys sorted, HTML characters
// left as they are, and a final newline.
func compact(o *unstructured.Unstructured) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(o.Object); err != nil {
		return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return buf.Bytes(), nil
}
