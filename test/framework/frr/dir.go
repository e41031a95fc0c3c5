package frr

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// daemonUser is the user FRR's daemons drop to (Debian's frr package).
const daemonUser = "frr"

// privateDir makes the daemons' directory: a fresh one under the system's
// temporary directory (a test's own temporary directory is mode 0700 and
// root's, which frr cannot enter), mode 0700 and owned by frr, so that no
// other local user can read it, plant a link in it or swap its files. It
// writes config there as frr.conf, readable by frr alone.
func privateDir(config string) (string, error) {
	u, err := user.Lookup(daemonUser)
	if err != nil {
		return "", fmt.Errorf("FRR's user: %w", err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return "", fmt.Errorf("FRR's user id %q: %w", u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return "", fmt.Errorf("FRR's group id %q: %w", u.Gid, err)
	}
	dir, err := os.MkdirTemp("", dirPrefix+"*") // mode 0700
	if err != nil {
		return "", err
	}
	conf := filepath.Join(dir, "frr.conf")
	err = writeNew(conf, []byte(config))
	if err == nil {
		err = errors.Join(os.Chown(conf, uid, gid), os.Chown(dir, uid, gid))
	}
	if err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// writeNew creates path (it must not exist, and is not followed if it is a
// link) with mode 0600 and writes data.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// copyLog copies a daemon's log out of the daemons' directory, which frr
// may write: a link there is refused, not followed, so a daemon (or
// whoever runs as frr) cannot make the copy read a file frr may not read.
// The copy is new, mode 0644; a missing log is no error.
func copyLog(from, to string) error {
	src, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("FRR log %s: %w", from, err)
	}
	defer src.Close()
	if fi, err := src.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("FRR log %s is not a regular file", from)
	}
	_ = os.Remove(to)
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}
