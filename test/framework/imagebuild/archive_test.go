package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteArchive: the archive is what `docker save` writes and `ctr
// images import` reads: manifest.json naming the config and the layer by
// their digests, the tag taken from the config's digest.
func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	l := NewLayer()
	l.AddFile("/usr/local/bin/x", 0o755, []byte("binary"))
	cfg := Config{User: "65532", Env: []string{defaultPath}, Entrypoint: []string{"/usr/local/bin/x"}}
	img, err := WriteArchive(dir, "localhost/test/x", l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	files := readTar(t, img.Archive)
	var manifest []archiveManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json %s: %v", files["manifest.json"], err)
	}
	m := manifest[0]
	if diff := cmp.Diff([]string{img.Ref}, m.RepoTags); diff != "" {
		t.Errorf("RepoTags (-want +got):\n%s", diff)
	}
	confDigest := digest(files[m.Config])
	if m.Config != confDigest+".json" || !strings.HasSuffix(img.Ref, ":"+confDigest[:16]) {
		t.Errorf("config %s with digest %s, image %s", m.Config, confDigest, img.Ref)
	}
	var conf imageConfig
	if err := json.Unmarshal(files[m.Config], &conf); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cfg, conf.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	layer := files[m.Layers[0]]
	if want := []string{"sha256:" + digest(layer)}; !cmp.Equal(want, conf.RootFS.DiffIDs) {
		t.Errorf("diff IDs %v, want %v", conf.RootFS.DiffIDs, want)
	}

	again, err := WriteArchive(t.TempDir(), "localhost/test/x", l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Ref != img.Ref {
		t.Errorf("the same image written twice is %s and %s", img.Ref, again.Ref)
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name], _ = io.ReadAll(tr)
	}
}
