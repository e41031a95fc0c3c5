package realcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SysctlRecord is a file (under /run, so a reboot forgets it with the
// changes) that holds the values some machine-wide sysctls had before a
// test bed changed them, until they are put back. A run that crashed
// leaves it: the next one restores the values it holds, which are the
// machine's own, not the crashed run's. Hold the HostLock while changing
// settings or the record.
type SysctlRecord struct {
	// Path is the record.
	Path string
	// root is where the sysctls are read and written; "" is /proc/sys.
	root string
}

// Save records the current values of keys (those the kernel lacks are
// left out), unless a record is there already: its values are the
// machine's own, from before a run that did not put them back. It says
// whether it wrote a record.
func (r SysctlRecord) Save(keys ...string) (bool, error) {
	if _, err := os.Stat(r.Path); err == nil {
		return false, nil
	}
	values := map[string]string{}
	for _, key := range keys {
		v, err := r.Read(key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		values[key] = v
	}
	data, err := json.Marshal(values)
	if err != nil {
		return false, err
	}
	if err := os.WriteFile(r.Path, data, 0o644); err != nil {
		return false, fmt.Errorf("record sysctls: %w", err)
	}
	return true, nil
}

// Restore puts back the values the record holds, if there is one, and
// removes it once all are back. It says whether it found a record.
func (r SysctlRecord) Restore() (bool, error) {
	data, err := os.ReadFile(r.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		return true, fmt.Errorf("read %s: %w", r.Path, err)
	}
	var errs []error
	for key, v := range values {
		if cur, err := r.Read(key); err == nil && cur == v {
			continue
		}
		if err := r.Write(key, v); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", key, v, err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(r.Path))
	}
	return true, errors.Join(errs...)
}

// Read is the value of the sysctl key ("net.netfilter.nf_conntrack_max").
func (r SysctlRecord) Read(key string) (string, error) {
	data, err := os.ReadFile(r.file(key))
	return strings.TrimSpace(string(data)), err
}

// Write sets the sysctl key. Save it first.
func (r SysctlRecord) Write(key, value string) error {
	return os.WriteFile(r.file(key), []byte(value), 0o644)
}

func (r SysctlRecord) file(key string) string {
	root := r.root
	if root == "" {
		root = "/proc/sys"
	}
	return filepath.Join(root, strings.ReplaceAll(key, ".", "/"))
}

// RestoreSysctls puts back the machine-wide settings a test-bed cluster
// found, if a record of them is there, and removes the record. Close calls
// it; so does whoever cleans up after a crashed cluster (the sandbox's
// down). The caller must hold the lock or know that no cluster runs.
func RestoreSysctls() error {
	_, err := clusterSysctls.Restore()
	return err
}
