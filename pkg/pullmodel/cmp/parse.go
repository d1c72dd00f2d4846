package cmp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifestExtensions are the file names Load reads.
var manifestExtensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// source tells where an object came from, for error messages.
type source struct {
	file string
	doc  int
}

func (s source) String() string {
	if s.doc == 0 {
		return s.file
	}
	return fmt.Sprintf("%s (document %d)", s.file, s.doc)
}

type object struct {
	obj *unstructured.Unstructured
	src source
}

// Load reads every Kubernetes object under dir: .yaml, .yml and .json files in dir and its
// sub-folders, in lexical path order, each possibly holding several YAML documents or a List.
// Hidden files and folders (.git and the like) are skipped. Every error names the file and
// document.
func Load(dir string) ([]object, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && manifestExtensions[strings.ToLower(filepath.Ext(path))] {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []object
	var errs []error
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		objs, err := loadFile(f, filepath.ToSlash(rel))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, objs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func loadFile(path, name string) ([]object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeStream(data, name)
}

// decodeStream reads the objects of a YAML stream (several documents, Lists) that came from
// name.
func decodeStream(data []byte, name string) ([]object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []object
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source{name, doc}, err)
		}
		objs, err := decode(raw, source{name, doc})
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	// A file with one document is named without a document number.
	if len(out) == 1 {
		out[0].src.doc = 0
	}
	return out, nil
}

// decode turns one YAML or JSON document into objects; a List is expanded, an empty document
// (comments only) yields none.
func decode(raw []byte, src source) ([]object, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %w", src, err)
	}
	if trimmed := bytes.TrimSpace(js); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, nil
	}
	var content map[string]any
	if err := json.Unmarshal(js, &content); err != nil {
		return nil, fmt.Errorf("%s: a manifest must be a YAML mapping (an object), not %s", src, describe(js))
	}
	u := &unstructured.Unstructured{Object: content}
	if strings.HasSuffix(u.GetKind(), "List") && u.IsList() {
		list, err := u.ToList()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		var out []object
		for i := range list.Items {
			item := &list.Items[i]
			if err := check(item); err != nil {
				return nil, fmt.Errorf("%s, item %d: %w", src, i+1, err)
			}
			out = append(out, object{obj: item, src: src})
		}
		return out, nil
	}
	if err := check(u); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return []object{{obj: u, src: src}}, nil
}

// check refuses what the work agent could not apply.
func check(u *unstructured.Unstructured) error {
	switch {
	case u.GetAPIVersion() == "":
		return errors.New("apiVersion is missing")
	case u.GetKind() == "":
		return errors.New("kind is missing")
	case u.GetName() == "" && u.GetGenerateName() != "":
		return fmt.Errorf("%s uses metadata.generateName; a ManifestWork needs a fixed metadata.name", u.GetKind())
	case u.GetName() == "":
		return fmt.Errorf("%s has no metadata.name", u.GetKind())
	}
	return nil
}

func describe(js []byte) string {
	switch bytes.TrimSpace(js)[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	default:
		return "a scalar"
	}
}
