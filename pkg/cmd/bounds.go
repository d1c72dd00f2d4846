package cmd

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/gitopscluster/config"
	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/pullmodel/setup"
)

// Bound is the range a numeric manager flag accepts, written in the flag's own syntax ("1h",
// "65535"); an empty side is open. The chart's values.schema.json carries the same range for
// the value that sets the flag, so `helm install` refuses what the manager would refuse.
type Bound struct {
	Min, Max string
	// MinExclusive: the value must be above Min, not equal to it.
	MinExclusive bool
}

// ManagerFlagBounds are the manager's bounded flags. Every other duration flag only has to be
// non-negative.
func ManagerFlagBounds() map[string]Bound {
	return map[string]Bound{
		"kube-api-qps":                  {Min: "0", MinExclusive: true},
		"kube-api-burst":                {Min: "1"},
		"resource-proxy-port":           {Min: "1", Max: "65535"},
		"gitopscluster-concurrency":     {Min: "1"},
		"signer-concurrency":            {Min: "1"},
		"pull-model-concurrency":        {Min: "1"},
		"max-revocation-percent":        {Min: "0", Max: "100"},
		"max-certificates-per-cluster":  {Min: "0"},
		"csr-burst-per-requester":       {Min: "0"},
		"agent-cert-validity":           {Min: "1h"},
		"cluster-secret-cert-validity":  {Min: shortDuration(config.MinClusterSecretValidity), Max: shortDuration(config.MaxClusterSecretValidity)},
		"pull-model-registration-grace": {Min: "0s", Max: shortDuration(setup.MaxRegistrationGrace)},
		// A lease, deadline or period of zero would spin; their order is checked with the options.
		"leader-elect-lease-duration": {Min: "0s", MinExclusive: true},
		"leader-elect-renew-deadline": {Min: "0s", MinExclusive: true},
		"leader-elect-retry-period":   {Min: "0s", MinExclusive: true},
	}
}

// shortDuration writes d in whole hours when it is one ("720h", not "720h0m0s").
func shortDuration(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// validateFlags checks every numeric flag of fs against its bound, and every other duration
// flag for a negative value, without any connection: a bad value is refused at start, with the
// flag's name, instead of once the controllers reach the API server.
func validateFlags(fs *pflag.FlagSet, bounds map[string]Bound) error {
	var errs []error
	names := []string{}
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, name := range names {
		f := fs.Lookup(name)
		b, bounded := bounds[name]
		if !bounded {
			if f.Value.Type() != "duration" {
				continue
			}
			b = Bound{Min: "0s"}
		}
		if err := checkBound(f.Value.Type(), f.Value.String(), b); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// checkBound compares value, of pflag type typ, with b.
func checkBound(typ, value string, b Bound) error {
	parse := func(s string) (float64, error) {
		if typ == "duration" {
			d, err := time.ParseDuration(s)
			return float64(d), err
		}
		return strconv.ParseFloat(s, 64)
	}
	v, err := parse(value)
	if err != nil {
		return err
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if b.Min != "" {
		if lo, err = parse(b.Min); err != nil {
			return fmt.Errorf("bad lower bound %q: %w", b.Min, err)
		}
	}
	if b.Max != "" {
		if hi, err = parse(b.Max); err != nil {
			return fmt.Errorf("bad upper bound %q: %w", b.Max, err)
		}
	}
	below := v < lo || (b.MinExclusive && v == lo)
	switch {
	case (below || v > hi) && b.Max != "":
		return fmt.Errorf("must be between %s and %s, got %s", b.Min, b.Max, value)
	case below && b.MinExclusive:
		return fmt.Errorf("must be more than %s, got %s", b.Min, value)
	case below:
		return fmt.Errorf("must be at least %s, got %s", b.Min, value)
	}
	return nil
}

// Outside returns the values just outside b for a flag of pflag type typ (the nearest refused
// value on each bounded side, in the flag's syntax: whole seconds for durations).
func (b Bound) Outside(typ string) []string {
	var out []string
	step := func(s string, dir int) string {
		if typ == "duration" {
			d, _ := time.ParseDuration(s)
			return fmt.Sprintf("%ds", int64(d/time.Second)+int64(dir))
		}
		f, _ := strconv.ParseFloat(s, 64)
		return strconv.FormatFloat(f+float64(dir), 'f', -1, 64)
	}
	if b.Min != "" {
		if b.MinExclusive {
			out = append(out, b.Min)
		} else {
			out = append(out, step(b.Min, -1))
		}
	}
	if b.Max != "" {
		out = append(out, step(b.Max, 1))
	}
	return out
}
