package frr

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// checkPrivate fails unless dir and its frr.conf are frr's alone: a local
// user who could write the directory could swap the configuration or
// plant a link that Stop would copy out.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	u, err := user.Lookup(daemonUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "frr.conf"): 0o600} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want || fi.Mode()&os.ModeSticky != 0 {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), want)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s belongs to uid %d, want %s's %d", path, st.Uid, daemonUser, uid)
		}
	}
}

// TestPrivateDir: the daemons' directory and configuration are frr's
// alone, whatever the umask.
func TestPrivateDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the directory to user frr")
	}
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir, err := privateDir("hostname x\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	checkPrivate(t, dir)
	if b, err := os.ReadFile(filepath.Join(dir, "frr.conf")); err != nil || string(b) != "hostname x\n" {
		t.Errorf("frr.conf = %q, %v", b, err)
	}
}

// TestStopDoesNotFollowLinks: a daemon's log that is a link (planted by
// whoever can write the daemons' directory) is not copied out, so Stop
// cannot be made to copy a file frr may not read into a readable one.
func TestStopDoesNotFollowLinks(t *testing.T) {
	dir, keep := t.TempDir(), t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "zebra.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bgpd.log"), []byte("bgpd says"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Instance{dir: dir, keep: keep}
	if err := r.Stop(); err == nil {
		t.Error("Stop copied a log that is a link without an error")
	}
	if b, err := os.ReadFile(filepath.Join(keep, "zebra.log")); err == nil {
		t.Errorf("Stop followed the link: the kept zebra.log says %q", b)
	}
	if b, err := os.ReadFile(filepath.Join(keep, "bgpd.log")); err != nil || string(b) != "bgpd says" {
		t.Errorf("bgpd's log was not kept: %q, %v", b, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the daemons' directory is still there: %v", err)
	}
}
