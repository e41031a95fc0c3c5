package realcluster

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSuiteImages builds the images of Kubernetes' e2e suite the test bed
// makes (with stand-ins for the tools' binaries) and checks each has what
// the specs run in it, where they look for it.
func TestSuiteImages(t *testing.T) {
	// The programs come from this machine's packages, which make test
	// installs (hack/install-deps.sh): a missing one fails the build with
	// its path, as it would fail the conformance lane.
	tools := t.TempDir()
	for _, name := range []string{"agnhost", "coredns", "regression-issue-74839"} {
		data, err := os.ReadFile("/usr/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tools, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"localhost.crt", "localhost.key"} {
		if err := os.WriteFile(filepath.Join(tools, name), []byte("porter's "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	ctx := t.Context()
	agnhost, err := BuildAgnhost(ctx, tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := BuildGlibcDNSTesting(ctx, tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	iptables, err := BuildDistrolessIptables(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	boom, err := BuildRegressionIssue74839(ctx, tools, dir)
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := BuildBusybox(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		archive string
		want    []string
	}{
		// DNS "configurable pod resolv.conf" runs /coredns; Services
		// "endpoints for unready pods" a preStop hook of /bin/sleep;
		// Proxy's https paths porter's certificate.
		{agnhost.Archive, []string{"agnhost", "coredns", "localhost.crt", "localhost.key", "bin/sleep", "usr/bin/sleep", "bin/sh", "usr/bin/curl", "usr/bin/nc", "usr/bin/dig", "usr/bin/getent", "etc/nsswitch.conf", "etc/wgetrc"}},
		// The DNS specs' glibc prober: sh -c 'dig ...; getent hosts ...'.
		{dns.Archive, []string{"coredns", "bin/sh", "usr/bin/dig", "usr/bin/getent", "usr/bin/seq", "bin/sleep", "etc/nsswitch.conf"}},
		// KubeProxy's CLOSE_WAIT spec: sleep 600, then cat and grep of
		// /proc/net/nf_conntrack in /bin/sh.
		{iptables.Archive, []string{"bin/sh", "bin/sleep", "bin/cat", "bin/grep", "usr/bin/test"}},
		// Conntrack's "invalid conntrack state" spec: the program alone.
		{boom.Archive, []string{"regression-issue-74839"}},
		// The Conntrack specs' busybox: sh -c "...; sleep 2; nc boom-server 9000".
		{busybox.Archive, []string{"bin/sh", "bin/sleep", "bin/echo", "bin/nc"}},
	} {
		got := imageFiles(t, tc.archive)
		for _, p := range tc.want {
			if !got[p] {
				t.Errorf("%s: no %s", filepath.Base(tc.archive), p)
			}
		}
	}
	if data := imageFile(t, agnhost.Archive, "localhost.crt"); string(data) != "porter's localhost.crt" {
		t.Errorf("agnhost's /localhost.crt is %q, want the tools' file", data)
	}
}

// imageFiles lists the paths in the layers of a docker-archive image.
func imageFiles(t *testing.T, archive string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	eachLayerFile(t, archive, func(name string, _ io.Reader) { out[strings.TrimPrefix(name, "./")] = true })
	return out
}

// imageFile returns the content of path in the layers of an image.
func imageFile(t *testing.T, archive, path string) []byte {
	t.Helper()
	var data []byte
	eachLayerFile(t, archive, func(name string, r io.Reader) {
		if strings.TrimPrefix(name, "./") == path {
			data, _ = io.ReadAll(r)
		}
	})
	return data
}

func eachLayerFile(t *testing.T, archive string, f func(name string, r io.Reader)) {
	t.Helper()
	file, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	outer := tar.NewReader(file)
	for {
		hdr, err := outer.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(hdr.Name, ".tar") {
			continue
		}
		layer, err := io.ReadAll(outer)
		if err != nil {
			t.Fatal(err)
		}
		inner := tar.NewReader(bytes.NewReader(layer))
		for {
			h, err := inner.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer %s: %v", archive, hdr.Name, err)
			}
			f(h.Name, inner)
		}
	}
}
