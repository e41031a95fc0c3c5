package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Layer is the content of an image's one layer: files, directories and
// symlinks by absolute path. Parent directories are implied. Written, it is
// deterministic: entries in path order, fixed times and owners as given.
type Layer struct {
	entries map[string]entry
}

type entry struct {
	typ      byte // tar.TypeReg, TypeDir or TypeSymlink
	mode     int64
	uid, gid int
	data     []byte // TypeReg, unless src is set
	src      string // TypeReg: a host file read when written
	link     string // TypeSymlink
}

// NewLayer returns an empty layer.
func NewLayer() *Layer { return &Layer{entries: map[string]entry{}} }

// AddFile adds a regular file with the given content.
func (l *Layer) AddFile(dest string, mode int64, data []byte) {
	l.entries[clean(dest)] = entry{typ: tar.TypeReg, mode: mode, data: data}
}

// AddDir adds a directory owned by uid:gid.
func (l *Layer) AddDir(dest string, mode int64, uid, gid int) {
	l.entries[clean(dest)] = entry{typ: tar.TypeDir, mode: mode, uid: uid, gid: gid}
}

// AddHostFile adds the host file src (following symlinks) as dest.
func (l *Layer) AddHostFile(src, dest string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("add %s: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("add %s: not a regular file", src)
	}
	l.entries[clean(dest)] = entry{typ: tar.TypeReg, mode: int64(fi.Mode().Perm()), src: src}
	return nil
}

// maxLinks bounds the symlinks followed for one path, as the kernel does.
const maxLinks = 40

// AddHostPath adds the host path p at the same path, with every symlink on
// the way (a merged-/usr /lib, a library's soname link) as a symlink, so
// that the image resolves p as this machine does.
func (l *Layer) AddHostPath(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("add %s: not an absolute path", p)
	}
	todo := strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		next := filepath.Join(cur, todo[0])
		todo = todo[1:]
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("add %s: %w", p, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return fmt.Errorf("add %s: too many symlinks", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return fmt.Errorf("add %s: %w", p, err)
		}
		l.entries[next] = entry{typ: tar.TypeSymlink, mode: 0o777, link: target}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(strings.Trim(target, "/"), "/"), todo...)
	}
	return l.AddHostFile(cur, cur)
}

// AddExecutable adds the host executable p and the shared libraries and
// loader it needs (as ldd lists them), each at its host path.
func (l *Layer) AddExecutable(ctx context.Context, p string) error {
	if err := l.AddHostPath(p); err != nil {
		return err
	}
	libs, err := sharedLibraries(ctx, p)
	if err != nil {
		return err
	}
	for _, lib := range libs {
		if err := l.AddHostPath(lib); err != nil {
			return err
		}
	}
	return nil
}

// sharedLibraries lists the absolute paths ldd prints for p; none for a
// static executable.
func sharedLibraries(ctx context.Context, p string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", p).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", p, err, bytes.TrimSpace(out))
	}
	return parseLdd(string(out)), nil
}

// parseLdd takes the absolute paths of ldd's lines: "libc.so.6 =>
// /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and "/lib64/ld-linux-x86-64.so.2
// (0x...)"; the vDSO has none.
func parseLdd(out string) []string {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
				break
			}
		}
	}
	return libs
}

// Paths lists the layer's entries in the order they are written.
func (l *Layer) Paths() []string {
	return slices.Sorted(maps.Keys(l.withParents()))
}

// withParents returns the entries plus a 0755 root-owned directory for
// every parent not given.
func (l *Layer) withParents() map[string]entry {
	all := maps.Clone(l.entries)
	for p := range l.entries {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := all[dir]; !ok {
				all[dir] = entry{typ: tar.TypeDir, mode: 0o755}
			}
		}
	}
	return all
}

// layerTime is every entry's modification time.
var layerTime = time.Unix(0, 0).UTC()

// WriteTo writes the layer as an uncompressed tar.
func (l *Layer) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	tw := tar.NewWriter(cw)
	all := l.withParents()
	for _, p := range slices.Sorted(maps.Keys(all)) {
		if err := writeEntry(tw, p, all[p]); err != nil {
			return cw.n, fmt.Errorf("write layer: %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, fmt.Errorf("write layer: %w", err)
	}
	return cw.n, nil
}

func writeEntry(tw *tar.Writer, p string, e entry) error {
	hdr := &tar.Header{
		Typeflag: e.typ, Name: strings.TrimPrefix(p, "/"), Mode: e.mode,
		Uid: e.uid, Gid: e.gid, ModTime: layerTime, Format: tar.FormatPAX,
	}
	data := e.data
	switch e.typ {
	case tar.TypeDir:
		hdr.Name += "/"
	case tar.TypeSymlink:
		hdr.Linkname = e.link
	case tar.TypeReg:
		if e.src != "" {
			var err error
			if data, err = os.ReadFile(e.src); err != nil {
				return err
			}
		}
		hdr.Size = int64(len(data))
	default:
		return errors.New("unknown entry type")
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func clean(p string) string { return path.Clean("/" + p) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
