package chart

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/argocd-agent-addon/argocd-agent-addon/test/testenv"
)

// TestDockerfileBuildsAStaticStampedBinary checks what can be checked without a Docker engine:
// every COPY source exists, the runtime stage is distroless and non-root, and the build
// command of the Dockerfile, run as written, gives a static binary stamped with the build args.
func TestDockerfileBuildsAStaticStampedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, m := range regexp.MustCompile(`(?m)^COPY (?:--from=\S+ )?(\S+) `).FindAllStringSubmatch(df, -1) {
		if strings.HasPrefix(m[0], "COPY --from") {
			continue
		}
		for _, src := range strings.Fields(m[1]) {
			if _, err := os.Stat(filepath.Join(root, src)); err != nil {
				t.Errorf("Dockerfile copies %s, which does not exist", src)
			}
		}
	}
	if !strings.Contains(df, "FROM gcr.io/distroless/static:nonroot") || !regexp.MustCompile(`(?m)^USER 65532`).MatchString(df) {
		t.Error("the runtime stage is not distroless static and non-root")
	}

	// Join the RUN line that builds the binary and substitute the build args.
	joined := strings.ReplaceAll(df, "\\\n", " ")
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(joined)
	if build == nil {
		t.Fatal("no `RUN CGO_ENABLED=0 go build` line")
	}
	out := filepath.Join(t.TempDir(), "argocd-agent-addon")
	cmdline := strings.NewReplacer("${VERSION}", "v9.9.9-test", "${GIT_COMMIT}", "abc1234", "/out/argocd-agent-addon", out).Replace(build[1])
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = root
	if outb, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, outb)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked; distroless/static cannot run it")
		}
	}
	v, err := exec.Command(out, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v), "v9.9.9-test") || !strings.Contains(string(v), "abc1234") {
		t.Errorf("version output %q is not stamped with the build args", v)
	}
}
