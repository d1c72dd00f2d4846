package manager

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/argocd-agent-addon/argocd-agent-addon/apis/v1alpha1"
)

func TestControllerOptionsDefaults(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	if err := opts.Validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	mo := ControllerOptions(scheme, opts)
	if !mo.Metrics.SecureServing || mo.Metrics.FilterProvider == nil || mo.Metrics.BindAddress != ":8443" {
		t.Errorf("metrics are not authenticated HTTPS on :8443 by default: secure=%v filter=%v addr=%q",
			mo.Metrics.SecureServing, mo.Metrics.FilterProvider != nil, mo.Metrics.BindAddress)
	}
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	for _, o := range mo.Metrics.TLSOpts {
		o(cfg)
	}
	if !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
		t.Errorf("metrics ALPN = %v, want HTTP/1.1 only by default", cfg.NextProtos)
	}
	if mo.PprofBindAddress != "" {
		t.Errorf("pprof is on by default at %q", mo.PprofBindAddress)
	}
	// OCM's hub controllers' timings (library-go's defaults), set explicitly so the flags show them.
	for name, got := range map[string]*time.Duration{"lease duration": mo.LeaseDuration, "renew deadline": mo.RenewDeadline, "retry period": mo.RetryPeriod} {
		want := map[string]time.Duration{"lease duration": 137 * time.Second, "renew deadline": 107 * time.Second, "retry period": 26 * time.Second}[name]
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %s", name, got, want)
		}
	}

	// The builder looks the concurrency up under the GroupKind the scheme gives the object
	// passed to For(); a key in another form would be ignored without an error.
	for obj, want := range map[client.Object]int{&v1alpha1.GitOpsCluster{}: 1, &certificatesv1.CertificateSigningRequest{}: 64} {
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := mo.Controller.GroupKindConcurrency[gvk.GroupKind().String()]; !ok || got != want {
			t.Errorf("concurrency of %s = %d (present %v), want %d; map %v", gvk.GroupKind(), got, ok, want, mo.Controller.GroupKindConcurrency)
		}
	}
}

func TestControllerOptionsCarryTheSettings(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.GitOpsClusterConcurrency, opts.SignerConcurrency = 3, 16
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 60*time.Second, 40*time.Second, 5*time.Second
	opts.PprofAddr = "127.0.0.1:6060"
	opts.MetricsCertDir = "/etc/metrics-certs"
	mo := ControllerOptions(scheme, opts)
	if got := mo.Controller.GroupKindConcurrency; got["GitOpsCluster.apps.open-cluster-management.io"] != 3 || got["CertificateSigningRequest.certificates.k8s.io"] != 16 {
		t.Errorf("GroupKindConcurrency = %v", got)
	}
	if *mo.LeaseDuration != 60*time.Second || *mo.RenewDeadline != 40*time.Second || *mo.RetryPeriod != 5*time.Second {
		t.Errorf("leader-election timings = %s/%s/%s", *mo.LeaseDuration, *mo.RenewDeadline, *mo.RetryPeriod)
	}
	if mo.PprofBindAddress != "127.0.0.1:6060" {
		t.Errorf("PprofBindAddress = %q", mo.PprofBindAddress)
	}
	if mo.Metrics.CertDir != "/etc/metrics-certs" {
		t.Errorf("metrics CertDir = %q", mo.Metrics.CertDir)
	}

	opts.EnableHTTP2 = true
	if m := ControllerOptions(scheme, opts).Metrics; len(m.TLSOpts) != 0 {
		t.Errorf("--enable-http2 still restricts ALPN: %d TLS options", len(m.TLSOpts))
	}

	opts.MetricsSecure = false
	opts.MetricsAddr = ":8080"
	m := ControllerOptions(scheme, opts).Metrics
	if m.SecureServing || m.FilterProvider != nil || m.BindAddress != ":8080" {
		t.Errorf("--metrics-secure=false still secures metrics: %+v", m)
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Options)
		want   string // empty: valid
	}{
		"pprof off":                   {func(o *Options) { o.PprofAddr = "" }, ""},
		"pprof 0":                     {func(o *Options) { o.PprofAddr = "0" }, ""},
		"pprof 127.0.0.1":             {func(o *Options) { o.PprofAddr = "127.0.0.1:6060" }, ""},
		"pprof 127.0.0.2":             {func(o *Options) { o.PprofAddr = "127.0.0.2:6060" }, ""},
		"pprof ::1":                   {func(o *Options) { o.PprofAddr = "[::1]:6060" }, ""},
		"pprof localhost":             {func(o *Options) { o.PprofAddr = "localhost:6060" }, ""},
		"pprof every interface":       {func(o *Options) { o.PprofAddr = ":6060" }, "not a loopback address"},
		"pprof 0.0.0.0":               {func(o *Options) { o.PprofAddr = "0.0.0.0:6060" }, "not a loopback address"},
		"pprof [::]":                  {func(o *Options) { o.PprofAddr = "[::]:6060" }, "not a loopback address"},
		"pprof pod IP":                {func(o *Options) { o.PprofAddr = "10.1.2.3:6060" }, "not a loopback address"},
		"pprof host name":             {func(o *Options) { o.PprofAddr = "manager.example.com:6060" }, "not a loopback address"},
		"pprof without port":          {func(o *Options) { o.PprofAddr = "127.0.0.1" }, "pprof-bind-address"},
		"zero gitopscluster workers":  {func(o *Options) { o.GitOpsClusterConcurrency = 0 }, "--gitopscluster-concurrency"},
		"negative signer workers":     {func(o *Options) { o.SignerConcurrency = -1 }, "--signer-concurrency"},
		"renew deadline past lease":   {func(o *Options) { o.RenewDeadline = o.LeaseDuration + time.Second }, "lease duration > renew deadline"},
		"retry period past renew":     {func(o *Options) { o.RetryPeriod = o.RenewDeadline + time.Second }, "lease duration > renew deadline"},
		"zero retry period":           {func(o *Options) { o.RetryPeriod = 0 }, "lease duration > renew deadline"},
		"retry period equal to renew": {func(o *Options) { o.RetryPeriod = o.RenewDeadline }, "lease duration > renew deadline"},
		// client-go jitters the retry period by up to 1.2 and refuses a renew deadline within it.
		"renew deadline within the jitter": {func(o *Options) { o.RenewDeadline, o.RetryPeriod = 30*time.Second, 26*time.Second }, "lease duration > renew deadline"},
		"spoke mirror":                     {func(o *Options) { o.Fleet.SpokeImageRegistry = "mirror.example.com:5000/argo" }, ""},
		"spoke mirror with scheme":         {func(o *Options) { o.Fleet.SpokeImageRegistry = "https://mirror.example.com" }, "--spoke-image-registry"},
		"spoke mirror with quote":          {func(o *Options) { o.Fleet.SpokeImageRegistry = `mirror"x` }, "--spoke-image-registry"},
		"pull secrets":                     {func(o *Options) { o.Fleet.SpokeImagePullSecrets = []string{"regcred", "mirror.creds"} }, ""},
		"pull secret not a name":           {func(o *Options) { o.Fleet.SpokeImagePullSecrets = []string{"Reg Cred"} }, "--spoke-image-pull-secrets"},
		"longer timings, still right": {func(o *Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = time.Minute, 45*time.Second, 5*time.Second
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error about %q, got %v", tc.want, err)
			}
		})
	}
}

func TestCacheOptionsHaveOneEntryPerKind(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, nss := range [][]string{nil, {"argocd", "team-a"}} {
		opts := DefaultOptions()
		opts.Fleet.ManagedNamespaces = nss
		seen := map[string]int{}
		for obj, byObject := range CacheOptions(opts).ByObject {
			gvk, err := apiutil.GVKForObject(obj, scheme)
			if err != nil {
				t.Fatal(err)
			}
			seen[gvk.Kind]++
			// With managed namespaces, nothing namespaced the manager may only touch there is
			// cached cluster-wide (the chart grants no cluster-wide list on them).
			if len(nss) > 0 && (gvk.Kind == "ConfigMap" || gvk.Kind == "Secret" || gvk.Kind == "Deployment") && len(byObject.Namespaces) != len(nss) {
				t.Errorf("managed namespaces %v: %s cached in %v", nss, gvk.Kind, byObject.Namespaces)
			}
		}
		for kind, n := range seen {
			if n != 1 {
				t.Errorf("managed namespaces %v: %d cache entries for %s; controller-runtime keeps one at random", nss, n, kind)
			}
		}
	}
}
