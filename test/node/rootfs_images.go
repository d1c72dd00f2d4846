package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// imageRecipe names the way the images below are assembled; it is part of their cache key, so
// change it whenever what they hold changes for the same inputs.
const imageRecipe = "rootfs-images/2"

// ArgoCDUID is the user Argo CD's image runs as, and RedisUID the upstream Redis image's.
const (
	ArgoCDUID = 999
	RedisUID  = 999
)

// argocdPackages are the Debian packages of Argo CD's image (its Dockerfile installs git tini
// ca-certificates gpg gpg-agent tzdata connect-proxy openssh-client on Ubuntu), plus what the
// Ubuntu base gave it that the manifests use: a shell, cp and ln (the repo-server's init
// container), and the usual text tools. git-lfs stands in for the binary the Dockerfile copies.
var argocdPackages = []string{
	"git", "git-lfs", "tini", "ca-certificates", "gpg", "gpg-agent", "tzdata", "connect-proxy", "openssh-client",
	"dash", "bash", "coreutils", "grep", "sed", "tar", "gzip", "findutils", "base-files",
}

// imageExcludes serve package installation only (maintainer scripts, debconf prompts, service
// management), which never runs in these images.
var imageExcludes = []string{"debconf", "adduser", "init-system-helpers", "lsb-base", "sysvinit-utils", "passwd", "login", "systemd", "systemd-sysv"}

// argocdLinks are the names the Dockerfile links to /usr/local/bin/argocd: the binary picks
// its component by the name it runs as.
var argocdLinks = []string{
	"argocd-server", "argocd-repo-server", "argocd-cmp-server", "argocd-application-controller", "argocd-dex",
	"argocd-notifications", "argocd-applicationset-controller", "argocd-k8s-auth", "argocd-commit-server",
}

// imagePath is the PATH of both images, Docker's default, as their bases set it.
const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// argocdEntrypoint is Argo CD's entrypoint.sh, which its image keeps for manifests that call it.
const argocdEntrypoint = `#!/bin/sh

# If we're started as PID 1, we should wrap command execution through tini to
# prevent leakage of orphaned processes ("zombies").
if test "$$" = "1"; then
	exec tini -- "$@"
else
	exec "$@"
fi
`

// gitLFSConfig is what `git lfs install --system` writes, as the Dockerfile runs it.
const gitLFSConfig = `[filter "lfs"]
	clean = git-lfs clean -- %f
	smudge = git-lfs smudge -- %f
	process = git-lfs filter-process
	required = true
`

// nsswitch makes name lookups use the image's files and DNS only.
const nsswitch = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"

// BuildArgoCDImage builds Argo CD's image from the argocd binary in argocdBinDir
// (hack/argocd-binaries.sh) and this machine's Debian packages, laid out as Argo CD's
// Dockerfile lays out its image: /usr/local/bin/argocd and its component links, tini as the
// entrypoint, user 999 (argocd, home /home/argocd), /app/config for the mounted
// configuration. helm and kustomize, which Debian does not package, are missing. The image
// is cached by content (ImageCacheDir); dir is scratch space for a build. It returns the
// docker-archive tarball's path, to import with Node.ImportImage.
func BuildArgoCDImage(argocdBinDir, dir, ref string) (string, error) {
	bin := filepath.Join(argocdBinDir, "argocd")
	var wrappers []LayerFile
	for _, w := range []string{"gpg-wrapper.sh", "git-verify-wrapper.sh"} {
		if _, err := os.Stat(filepath.Join(argocdBinDir, w)); err == nil {
			wrappers = append(wrappers, LayerFile{Path: "/usr/local/bin/" + w, Mode: 0o755, HostFile: filepath.Join(argocdBinDir, w)})
		}
	}
	inputs := []string{bin}
	for _, w := range wrappers {
		inputs = append(inputs, w.HostFile)
	}
	return cachedImage("argocd", dir, ref, inputs, func(tarPath string) error {
		base := filepath.Join(dir, "argocd-packages.tar")
		if _, err := WritePackageLayer(base, PackageLayer{
			Packages:  argocdPackages,
			Exclude:   imageExcludes,
			HostPaths: []string{"/etc/ssl/certs"},
			Files:     baseFiles("argocd", ArgoCDUID, "/home/argocd", "/bin/sh"),
		}); err != nil {
			return err
		}
		files := append([]LayerFile{
			{Path: "/usr/local/bin/argocd", Mode: 0o755, HostFile: bin},
			{Path: "/usr/local/bin/entrypoint.sh", Mode: 0o755, Body: []byte(argocdEntrypoint)},
			{Path: "/usr/local/bin/uid_entrypoint.sh", Mode: 0o777, Link: "/usr/local/bin/entrypoint.sh"},
			{Path: "/etc/gitconfig", Mode: 0o644, Body: []byte(gitLFSConfig)},
			// The known hosts come from a ConfigMap mounted on /app/config/ssh.
			{Path: "/app/config/ssh", Mode: 0o755, Dir: true},
			{Path: "/app/config/ssh/ssh_known_hosts", Mode: 0o644},
			{Path: "/etc/ssh/ssh_known_hosts", Mode: 0o777, Link: "/app/config/ssh/ssh_known_hosts"},
			{Path: "/app/config", Mode: 0o755, Dir: true},
			{Path: "/app/config/tls", Mode: 0o755, Dir: true},
			{Path: "/app/config/gpg/source", Mode: 0o755, Dir: true},
			{Path: "/app/config/gpg", Mode: 0o755, Dir: true},
			{Path: "/app/config/gpg/keys", Mode: 0o700, Dir: true, UID: ArgoCDUID},
			{Path: "/app", Mode: 0o755, Dir: true},
		}, wrappers...)
		for _, l := range argocdLinks {
			files = append(files, LayerFile{Path: "/usr/local/bin/" + l, Mode: 0o777, Link: "/usr/local/bin/argocd"})
		}
		top := filepath.Join(dir, "argocd-bin.tar")
		if err := WriteFilesLayer(top, files); err != nil {
			return err
		}
		defer os.Remove(base)
		defer os.Remove(top)
		return WriteLayeredImage(tarPath, LayeredImage{
			Ref:        ref,
			Layers:     []string{base, top},
			Entrypoint: []string{"/usr/bin/tini", "--"},
			Env: []string{imagePath, fmt.Sprintf("ARGOCD_USER_ID=%d", ArgoCDUID), "DEBIAN_FRONTEND=noninteractive",
				"USER=argocd", "GRPC_ENABLE_TXT_SERVICE_CONFIG=false"},
			User:       fmt.Sprint(ArgoCDUID),
			WorkingDir: "/home/argocd",
		})
	})
}

// redisEntrypoint does what the upstream image's docker-entrypoint.sh does for a non-root
// user: options alone (the Deployment's args) run redis-server with them. Upstream builds
// redis with protected mode off by default, Debian does not; without a config file the
// option restores upstream's default, and later arguments still override it.
const redisEntrypoint = `#!/bin/sh
set -e
case "$1" in
-*|*.conf) set -- redis-server "$@" ;;
esac
if [ "$1" = redis-server ]; then
	case "$2" in
	""|--*) shift; set -- redis-server --protected-mode no "$@" ;;
	esac
fi
if [ "$(umask)" = 0022 ]; then
	umask 0077
fi
exec "$@"
`

// BuildRedisImage builds a Redis image from this machine's redis-server package, standing in
// for the upstream image Argo CD's manifests name: the same entrypoint behaviour (arguments
// that are options go to redis-server), user 999, /data as the working folder and a volume.
// Cached like BuildArgoCDImage.
func BuildRedisImage(dir, ref string) (string, error) {
	return cachedImage("redis", dir, ref, nil, func(tarPath string) error {
		base := filepath.Join(dir, "redis-packages.tar")
		files := append(baseFiles("redis", RedisUID, "/data", "/usr/sbin/nologin"),
			LayerFile{Path: "/usr/local/bin/docker-entrypoint.sh", Mode: 0o755, Body: []byte(redisEntrypoint)},
			LayerFile{Path: "/data", Mode: 0o755, Dir: true, UID: RedisUID, GID: RedisUID},
		)
		if _, err := WritePackageLayer(base, PackageLayer{
			Packages: []string{"redis-server", "dash", "coreutils"},
			Exclude:  imageExcludes,
			Files:    files,
		}); err != nil {
			return err
		}
		defer os.Remove(base)
		return WriteLayeredImage(tarPath, LayeredImage{
			Ref:        ref,
			Layers:     []string{base},
			Entrypoint: []string{"/usr/local/bin/docker-entrypoint.sh"},
			Cmd:        []string{"redis-server"},
			Env:        []string{imagePath},
			User:       fmt.Sprintf("%d:%d", RedisUID, RedisUID),
			WorkingDir: "/data",
			Volumes:    []string{"/data"},
		})
	})
}

// baseFiles are what a base image has besides packages: the users (root and the image's own,
// whose uid is also its group), name lookup, /tmp, and the user's home.
func baseFiles(user string, uid int, home, shell string) []LayerFile {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n%s:x:%d:%d::%s:%s\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", user, uid, uid, home, shell)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\nnogroup:x:65534:\n", user, uid)
	return []LayerFile{
		{Path: "/etc/passwd", Mode: 0o644, Body: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Body: []byte(group)},
		{Path: "/etc/nsswitch.conf", Mode: 0o644, Body: []byte(nsswitch)},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/root", Mode: 0o700, Dir: true},
		// Group root may write the home, as the Dockerfile's chmod g=u allows, for
		// arbitrary uids in group 0.
		{Path: home, Mode: 0o775, Dir: true, UID: uid},
	}
}

// ImageCacheDir is where built images are kept, under the project's binary cache
// (hack/lib/binary-cache.sh): $ARGOCD_AGENT_ADDON_CACHE, else the user's cache folder.
func ImageCacheDir() string {
	if d := os.Getenv("ARGOCD_AGENT_ADDON_CACHE"); d != "" {
		return filepath.Join(d, "images")
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "argocd-agent-addon", "images")
}

// cachedImage returns the cached tarball for name when one was built from the same inputs
// (the recipe, ref, the installed packages' versions, the contents of files), else builds
// it with build into the cache and returns it.
func cachedImage(name, dir, ref string, files []string, build func(tarPath string) error) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", imageRecipe, name, ref)
	versions, err := installedVersions()
	if err != nil {
		return "", err
	}
	io.WriteString(h, versions)
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", filepath.Base(f))
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", err
		}
	}
	key := hex.EncodeToString(h.Sum(nil))[:20]
	cache := ImageCacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tarPath := filepath.Join(cache, name+"-"+key+".tar")
	if _, err := os.Stat(tarPath); err == nil {
		return tarPath, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(cache, "."+name+"-*.tar")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := build(tmp.Name()); err != nil {
		return "", fmt.Errorf("building the %s image: %w", name, err)
	}
	// A rename: a concurrent build of the same key gives the same bytes, and readers never
	// see a partial file.
	if err := os.Rename(tmp.Name(), tarPath); err != nil {
		return "", err
	}
	pruneImages(cache, name, tarPath)
	return tarPath, nil
}

// pruneImages removes the earlier builds of name, each a few hundred megabytes, once no one is
// likely to still be importing them.
func pruneImages(cache, name, keep string) {
	old, _ := filepath.Glob(filepath.Join(cache, name+"-*.tar"))
	for _, p := range old {
		fi, err := os.Stat(p)
		if p == keep || err != nil || time.Since(fi.ModTime()) < time.Hour {
			continue
		}
		if k := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), name+"-"), ".tar"); len(k) == 20 {
			os.Remove(p)
		}
	}
}
