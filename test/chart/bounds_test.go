package chart

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/strvals"

	"github.com/argocd-agent-addon/argocd-agent-addon/pkg/cmd"
)

// boundedValues names the chart value that sets each bounded manager flag.
var boundedValues = map[string]string{
	"kube-api-qps":                  "kubeAPI.qps",
	"kube-api-burst":                "kubeAPI.burst",
	"resource-proxy-port":           "principalDiscovery.resourceProxyPort",
	"gitopscluster-concurrency":     "concurrency.gitOpsCluster",
	"signer-concurrency":            "concurrency.signer",
	"pull-model-concurrency":        "pullModel.concurrency",
	"max-revocation-percent":        "revocation.maxPercent",
	"max-certificates-per-cluster":  "signer.maxCertificatesPerCluster",
	"csr-burst-per-requester":       "signer.burstPerRequester",
	"agent-cert-validity":           "signer.certificateValidity",
	"cluster-secret-cert-validity":  "pki.clusterSecretCertValidity",
	"pull-model-registration-grace": "pullModel.registrationGrace",
	"leader-elect-lease-duration":   "leaderElectionTiming.leaseDuration",
	"leader-elect-renew-deadline":   "leaderElectionTiming.renewDeadline",
	"leader-elect-retry-period":     "leaderElectionTiming.retryPeriod",
}

// valueFor is a chart value for a flag of pflag type typ: durations are strings, numbers are
// numbers (as --set would give them).
func valueFor(t *testing.T, path, typ, v string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	set := strvals.ParseInto
	if typ == "duration" {
		set = strvals.ParseIntoString
	}
	if err := set(path+"="+v, vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// durationForms writes d as every whole number of hours, minutes and seconds it is, and as Go
// prints it.
func durationForms(d time.Duration) []string {
	out := []string{fmt.Sprintf("%ds", int64(d/time.Second))}
	if d%time.Minute == 0 {
		out = append(out, fmt.Sprintf("%dm", int64(d/time.Minute)))
	}
	if d%time.Hour == 0 {
		out = append(out, fmt.Sprintf("%dh", int64(d/time.Hour)))
	}
	// As Go prints it (time.Duration's String, "1h0m0s"): what a value set from a Go
	// program, or copied from the manager's log, looks like.
	return append(out, d.String())
}

// TestSchemaCarriesTheBinarysBounds walks each bounded manager flag through the chart: the value
// just outside the binary's range (cmd.ManagerFlagBounds) is refused by `helm template` (the
// values schema, before anything is installed), and the bounds themselves, written in hours,
// minutes or seconds, render the flag with that value, which the binary accepts.
// pkg/cmd's TestManagerRefusesEveryBoundedFlagOutOfRangeBeforeConnecting walks the same values
// through the binary.
func TestSchemaCarriesTheBinarysBounds(t *testing.T) {
	manager := managerCommand(t)
	bounds := cmd.ManagerFlagBounds()
	for name := range bounds {
		if _, ok := boundedValues[name]; !ok {
			t.Errorf("--%s is bounded in the binary; name its chart value here", name)
		}
	}
	for name, path := range boundedValues {
		b, ok := bounds[name]
		if !ok {
			t.Errorf("--%s: no bound in the binary", name)
			continue
		}
		typ := manager.Flags().Lookup(name).Value.Type()
		outside := b.Outside(typ)
		if typ == "duration" {
			for _, v := range b.Outside(typ) {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatal(err)
				}
				outside = append(outside, d.String())
			}
		}
		for _, v := range outside {
			if _, err := render(t, valueFor(t, path, typ, v)); err == nil || !strings.Contains(err.Error(), path[strings.LastIndex(path, ".")+1:]) {
				t.Errorf("%s=%s (--%s out of range): want a schema error, got %v", path, v, name, err)
			}
		}
		var inside []string
		for _, edge := range []string{b.Min, b.Max} {
			if edge == "" || (edge == b.Min && b.MinExclusive) {
				continue
			}
			if typ == "duration" {
				d, err := time.ParseDuration(edge)
				if err != nil {
					t.Fatal(err)
				}
				inside = append(inside, durationForms(d)...)
			} else {
				inside = append(inside, edge)
			}
		}
		for _, v := range inside {
			args, err := renderArgs(t, valueFor(t, path, typ, v))
			if err != nil {
				t.Errorf("%s=%s (--%s at its bound): refused: %v", path, v, name, err)
				continue
			}
			if !slices.ContainsFunc(args, func(a string) bool { return sameFlagValue(a, name, v, typ) }) {
				t.Errorf("%s=%s does not render --%s=%s: %v", path, v, name, v, args)
			}
			f := managerCommand(t).Flags().Lookup(name)
			if err := f.Value.Set(v); err != nil {
				t.Errorf("--%s=%s: the binary refuses a value at its bound: %v", name, v, err)
			}
		}
	}
}

// sameFlagValue reports whether arg is --name with a value equal to v.
func sameFlagValue(arg, name, v, typ string) bool {
	got, ok := strings.CutPrefix(arg, "--"+name+"=")
	if !ok {
		return false
	}
	if typ == "duration" {
		a, err1 := time.ParseDuration(got)
		b, err2 := time.ParseDuration(v)
		return err1 == nil && err2 == nil && a == b
	}
	a, err1 := strconv.ParseFloat(got, 64)
	b, err2 := strconv.ParseFloat(v, 64)
	return err1 == nil && err2 == nil && a == b
}

func renderArgs(t *testing.T, vals map[string]any) ([]string, error) {
	t.Helper()
	objs, err := render(t, vals)
	if err != nil {
		return nil, err
	}
	return managerArgs(t, objs), nil
}
