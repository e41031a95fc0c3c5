package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLdd(t *testing.T) {
	out := `	linux-vdso.so.1 (0x00007ffd)
	libnftables.so.1 => /lib/x86_64-linux-gnu/libnftables.so.1 (0x00007f31)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f31)
	/lib64/ld-linux-x86-64.so.2 (0x00007f31)
`
	want := []string{"/lib/x86_64-linux-gnu/libnftables.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if diff := cmp.Diff(want, parseLdd(out)); diff != "" {
		t.Errorf("parseLdd (-want +got):\n%s", diff)
	}
}

// TestAddHostPath: a path reached through a directory symlink (merged
// /usr) and a file symlink (a soname) arrives with both links.
func TestAddHostPath(t *testing.T) {
	root := t.TempDir()
	mustMkdir(t, filepath.Join(root, "usr/lib"))
	mustWrite(t, filepath.Join(root, "usr/lib/libx.so.1.2"), "elf")
	mustSymlink(t, "usr/lib", filepath.Join(root, "lib"))
	mustSymlink(t, "libx.so.1.2", filepath.Join(root, "usr/lib/libx.so.1"))

	l := NewLayer()
	if err := l.AddHostPath(filepath.Join(root, "lib/libx.so.1")); err != nil {
		t.Fatal(err)
	}
	got := readLayer(t, l)
	want := map[string]string{
		root + "/lib":                 "-> usr/lib",
		root + "/usr/lib/libx.so.1":   "-> libx.so.1.2",
		root + "/usr/lib/libx.so.1.2": "elf",
	}
	for p, content := range want {
		if got[p] != content {
			t.Errorf("%s: %q, want %q", p, got[p], content)
		}
	}
	if _, ok := got[root+"/usr/lib"]; !ok {
		t.Errorf("no parent directory %s/usr/lib in %v", root, got)
	}
}

// TestLayerIsDeterministic: the same content gives the same bytes, so the
// image's digest names its content.
func TestLayerIsDeterministic(t *testing.T) {
	build := func(order []string) []byte {
		l := NewLayer()
		for _, p := range order {
			l.AddFile(p, 0o644, []byte(p))
		}
		var b bytes.Buffer
		if _, err := l.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a := build([]string{"/etc/a", "/usr/bin/b", "/etc/c"})
	b := build([]string{"/etc/c", "/usr/bin/b", "/etc/a"})
	if !bytes.Equal(a, b) {
		t.Error("the same files added in another order gave another layer")
	}
}

// readLayer returns each entry of the written layer: a file's content, or
// "-> target" for a symlink, "" for a directory.
func readLayer(t *testing.T, l *Layer) map[string]string {
	t.Helper()
	var b bytes.Buffer
	if _, err := l.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(&b)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := "/" + filepath.Clean(hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			out[name] = "-> " + hdr.Linkname
		case tar.TypeReg:
			data, _ := io.ReadAll(tr)
			out[name] = string(data)
		default:
			out[name] = ""
		}
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
