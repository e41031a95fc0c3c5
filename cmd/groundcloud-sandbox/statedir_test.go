package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateDir: the state directory is made private, and one that others
// may write, or a link, is refused.
func TestStateDir(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dir, wantErr string
	}{
		{name: "new", dir: filepath.Join(base, "new")},
		{name: "writable by others", dir: open, wantErr: "writable by others"},
		{name: "a link", dir: link, wantErr: "not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := stateDir(tt.dir)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(tt.dir)
				if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
					t.Errorf("made %v, %v", fi.Mode(), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("stateDir = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}
