package benchkit

import (
	"fmt"
	"io"
	"slices"
)

// Median is the middle of values (the mean of the two middle ones for an even count).
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Spread is how far the values lie apart, as a share of their median: (max-min)/median.
func Spread(values []float64) float64 {
	m := Median(values)
	if m == 0 || len(values) == 0 {
		return 0
	}
	return (slices.Max(values) - slices.Min(values)) / m
}

// Table gathers figures of repeated runs, by name in the order first added, and prints each
// one's median and spread.
type Table struct {
	names  []string
	format map[string]string
	values map[string][]float64
}

// Add records one run's value of a figure; format prints one value (e.g. "%.2f s").
func (t *Table) Add(name, format string, v float64) {
	if t.values == nil {
		t.values, t.format = map[string][]float64{}, map[string]string{}
	}
	if _, ok := t.values[name]; !ok {
		t.names = append(t.names, name)
		t.format[name] = format
	}
	t.values[name] = append(t.values[name], v)
}

// Values are the runs' values of a figure.
func (t *Table) Values(name string) []float64 { return t.values[name] }

// Print writes one line per figure: the median, the lowest and highest, the spread, and every
// run's value in the order run.
func (t *Table) Print(w io.Writer) {
	width := 0
	for _, n := range t.names {
		width = max(width, len(n))
	}
	for _, n := range t.names {
		v, f := t.values[n], t.format[n]
		runs := ""
		for i, x := range v {
			if i > 0 {
				runs += ", "
			}
			runs += fmt.Sprintf(f, x)
		}
		_, _ = fmt.Fprintf(w, "  %-*s  median %s  (%s to %s, spread %.0f%%; runs: %s)\n", width, n,
			fmt.Sprintf(f, Median(v)), fmt.Sprintf(f, slices.Min(v)), fmt.Sprintf(f, slices.Max(v)), 100*Spread(v), runs)
	}
}
