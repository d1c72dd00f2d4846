package pullmodel_test

import (
	"encoding/json"
	"sort"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
