package node

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Package is an installed Debian package.
type Package struct {
	Name, Arch, Version string
	// Files are the paths dpkg records for it (its .list), as dpkg names them.
	Files []string
}

type dpkgEntry struct {
	Package
	depends string
}

// installedPackages reads dpkg's database: installed packages by name, and the installed
// providers of each virtual package.
func installedPackages() (map[string]*dpkgEntry, map[string][]string, error) {
	out, err := exec.Command("dpkg-query", "-W", "-f",
		`${Package}\t${Architecture}\t${Version}\t${db:Status-Abbrev}\t${Pre-Depends}, ${Depends}\t${Provides}\n`).Output()
	if err != nil {
		return nil, nil, fmt.Errorf("dpkg-query: %w", err)
	}
	pkgs := map[string]*dpkgEntry{}
	provided := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 6 || !strings.HasPrefix(f[3], "ii") {
			continue
		}
		e := &dpkgEntry{Package: Package{Name: f[0], Arch: f[1], Version: f[2]}, depends: f[4]}
		// A foreign-architecture copy of a library must not hide the native one.
		if old, ok := pkgs[e.Name]; ok && old.Arch != e.Arch && e.Arch != runtime.GOARCH {
			continue
		}
		for _, p := range strings.Split(f[5], ",") {
			if p = depName(p); p != "" {
				provided[p] = append(provided[p], e.Name)
			}
		}
		pkgs[e.Name] = e
	}
	return pkgs, provided, nil
}

// depName is the package name in a relation such as "libc6:amd64 (>= 2.34)".
func depName(rel string) string {
	rel = strings.TrimSpace(rel)
	if i := strings.IndexAny(rel, " ("); i >= 0 {
		rel = rel[:i]
	}
	if i := strings.IndexByte(rel, ':'); i >= 0 {
		rel = rel[:i]
	}
	return rel
}

// PackageClosure returns the installed packages that roots need (Pre-Depends and Depends,
// not Recommends), sorted by name, with their file lists. Of alternatives the first installed
// one is taken. Excluded packages are left out, and so is what only they would pull in: they
// serve maintainer scripts (debconf, adduser) that never run in an image.
func PackageClosure(roots, exclude []string) ([]Package, error) {
	pkgs, provided, err := installedPackages()
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, e := range exclude {
		skip[e] = true
	}
	resolve := func(name string) string {
		if _, ok := pkgs[name]; ok {
			return name
		}
		if p := provided[name]; len(p) > 0 {
			sort.Strings(p)
			return p[0]
		}
		return ""
	}
	seen := map[string]bool{}
	queue := []string{}
	for _, r := range roots {
		n := resolve(r)
		if n == "" {
			return nil, fmt.Errorf("package %s is not installed (hack/node-packages.sh installs it)", r)
		}
		queue = append(queue, n)
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] || skip[n] {
			continue
		}
		seen[n] = true
		for _, group := range strings.Split(pkgs[n].depends, ",") {
			if strings.TrimSpace(group) == "" {
				continue
			}
			chosen := ""
			for _, alt := range strings.Split(group, "|") {
				if chosen = resolve(depName(alt)); chosen != "" {
					break
				}
			}
			if chosen == "" {
				return nil, fmt.Errorf("%s depends on %q, which is not installed", n, strings.TrimSpace(group))
			}
			queue = append(queue, chosen)
		}
	}
	var out []Package
	for n := range seen {
		p := pkgs[n].Package
		if p.Files, err = packageFiles(p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// packageFiles reads the package's file list from dpkg's database; a package of which several
// architectures may be installed (Multi-Arch: same) has its list named with the architecture.
func packageFiles(p Package) ([]string, error) {
	var b []byte
	var err error
	for _, f := range []string{p.Name + ":" + p.Arch + ".list", p.Name + ".list"} {
		if b, err = os.ReadFile(filepath.Join("/var/lib/dpkg/info", f)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("file list of %s: %w", p.Name, err)
	}
	var files []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && l != "/." {
			files = append(files, l)
		}
	}
	return files, nil
}

// skippedPrefixes hold documentation and translations, which nothing in the images reads.
var skippedPrefixes = []string{
	"/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/",
	"/usr/share/lintian/", "/usr/share/doc-base/", "/usr/share/bug/",
}

func skipped(p string) bool {
	for _, s := range skippedPrefixes {
		if strings.HasPrefix(p+"/", s) {
			return true
		}
	}
	return false
}

// LayerFile is one entry a layer gets besides the packages' files.
type LayerFile struct {
	// Path is where it goes in the image (absolute).
	Path string
	// Mode is the tar mode: permissions, with 0o1000 for the sticky bit.
	Mode int64
	// Dir, Link or neither (a regular file, from Body or HostFile) is its type.
	Dir  bool
	Link string // a symlink's target
	Body []byte
	// HostFile, if set, is read for the file's content instead of Body.
	HostFile string
	UID, GID int
}

// tarMode keeps the permissions and the sticky bit of a host file.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// layerEntry is a tar entry waiting to be written: from the host (hostPath) or given.
type layerEntry struct {
	hdr      tar.Header
	hostPath string
	body     []byte
}

// layerBuilder collects entries by their path in the image, so that a path listed by two
// packages, or by a package and a caller, is written once.
type layerBuilder struct {
	entries map[string]*layerEntry
	// inodes maps a host file already taken to its image path, for hard links.
	inodes map[[2]uint64]string
}

func newLayerBuilder() *layerBuilder {
	return &layerBuilder{entries: map[string]*layerEntry{}, inodes: map[[2]uint64]string{}}
}

// epoch is every entry's time, so that the same inputs give the same layer.
var epoch = time.Unix(0, 0)

// addHost takes the host's file at p (as dpkg names it) into the layer. Its folders are
// resolved first: on a merged-/usr system dpkg lists /bin/cp, which is /usr/bin/cp, and /bin
// itself, which becomes the same symlink in the image. Missing paths (a conffile removed, docs
// left out by dpkg's path-exclude) are skipped.
func (b *layerBuilder) addHost(p string) error {
	if skipped(p) {
		return nil
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return nil
	}
	real := filepath.Join(dir, filepath.Base(p))
	fi, err := os.Lstat(real)
	if err != nil {
		return nil
	}
	if err := b.addParents(dir); err != nil {
		return err
	}
	return b.addInfo(real, fi)
}

// addParents adds the host folders above an entry, so the layer is complete on its own.
func (b *layerBuilder) addParents(dir string) error {
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if _, ok := b.entries[d]; ok {
			break
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if err := b.addInfo(d, fi); err != nil {
			return err
		}
	}
	return nil
}

func (b *layerBuilder) addInfo(real string, fi fs.FileInfo) error {
	if _, ok := b.entries[real]; ok {
		return nil
	}
	// Owned by root whatever the host says: host users' ids mean nothing in the image, and a
	// set-id bit would then grant root's rights, so those bits go too.
	h := tar.Header{Name: strings.TrimPrefix(real, "/"), Mode: tarMode(fi.Mode()), ModTime: epoch, Format: tar.FormatPAX}
	e := &layerEntry{}
	switch {
	case fi.IsDir():
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(real)
		if err != nil {
			return err
		}
		h.Typeflag, h.Linkname = tar.TypeSymlink, target
	case fi.Mode().IsRegular():
		st, _ := fi.Sys().(*syscall.Stat_t)
		if st != nil && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := b.inodes[key]; ok {
				h.Typeflag, h.Linkname = tar.TypeLink, strings.TrimPrefix(first, "/")
				break
			}
			b.inodes[key] = real
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		e.hostPath = real
	default:
		// Devices, sockets and pipes have no place in an image.
		return nil
	}
	e.hdr = h
	b.entries[real] = e
	return nil
}

// addTree takes a host folder (or file) and everything under it.
func (b *layerBuilder) addTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return b.addHost(p)
	})
}

// add puts a given entry in the layer, replacing what the host provided at that path.
func (b *layerBuilder) add(f LayerFile) error {
	name := strings.TrimPrefix(filepath.Clean(f.Path), "/")
	h := tar.Header{Name: name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: epoch, Format: tar.FormatPAX}
	e := &layerEntry{body: f.Body}
	switch {
	case f.Dir:
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case f.Link != "":
		h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
	case f.HostFile != "":
		fi, err := os.Stat(f.HostFile)
		if err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		e.hostPath, e.body = f.HostFile, nil
	default:
		h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Body))
	}
	e.hdr = h
	b.entries["/"+name] = e
	return nil
}

// writeTo writes the entries sorted by path (a folder before what it holds) and returns the
// layer's sha256 and size.
func (b *layerBuilder) writeTo(path string) (digest string, size int64, err error) {
	names := make([]string, 0, len(b.entries))
	for n := range b.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	f, err := os.Create(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	sum := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(f, sum)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	tw := tar.NewWriter(bw)
	for _, n := range names {
		e := b.entries[n]
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return "", 0, err
		}
		switch {
		case e.hostPath != "":
			src, err := os.Open(e.hostPath)
			if err != nil {
				return "", 0, err
			}
			_, err = io.CopyN(tw, src, e.hdr.Size)
			src.Close()
			if err != nil {
				return "", 0, fmt.Errorf("%s: %w", e.hostPath, err)
			}
		case len(e.body) > 0:
			if _, err := tw.Write(e.body); err != nil {
				return "", 0, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, err
	}
	if err := f.Close(); err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(sum.Sum(nil)), cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// PackageLayer describes an image layer made of installed Debian packages.
type PackageLayer struct {
	// Packages are the roots: they and what they depend on (PackageClosure) are copied.
	Packages []string
	// Exclude are packages left out of the closure.
	Exclude []string
	// HostPaths are further host files or folders (with what they hold) that no package
	// lists, such as the CA bundle update-ca-certificates generates.
	HostPaths []string
	// Files are added last and win over the host's: users, configuration, links.
	Files []LayerFile
}

// WritePackageLayer writes the layer l describes as an uncompressed tarball at path and
// returns the packages it holds.
func WritePackageLayer(path string, l PackageLayer) ([]Package, error) {
	pkgs, err := PackageClosure(l.Packages, l.Exclude)
	if err != nil {
		return nil, err
	}
	b := newLayerBuilder()
	// On a merged-/usr system these are the links everything under them resolves through.
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib64"} {
		if err := b.addHost(p); err != nil {
			return nil, err
		}
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			if err := b.addHost(f); err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
		}
	}
	for _, p := range l.HostPaths {
		if err := b.addTree(p); err != nil {
			return nil, err
		}
	}
	for _, f := range l.Files {
		if err := b.add(f); err != nil {
			return nil, err
		}
	}
	if _, _, err := b.writeTo(path); err != nil {
		return nil, err
	}
	return pkgs, nil
}

// WriteFilesLayer writes a layer of the given entries only.
func WriteFilesLayer(path string, files []LayerFile) error {
	b := newLayerBuilder()
	for _, f := range files {
		if err := b.add(f); err != nil {
			return err
		}
	}
	_, _, err := b.writeTo(path)
	return err
}

// installedVersions lists every installed package with its version: part of an image's cache
// key, since any upgrade may change a closure.
func installedVersions() (string, error) {
	pkgs, _, err := installedPackages()
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(pkgs))
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&buf, "%s %s %s\n", n, pkgs[n].Arch, pkgs[n].Version)
	}
	return buf.String(), nil
}
