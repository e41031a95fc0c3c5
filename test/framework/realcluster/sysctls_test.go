package realcluster

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	ctMax       = "net.netfilter.nf_conntrack_max"
	kernelPanic = "kernel.panic"
)

// fakeProc is a directory laid out as /proc/sys with values.
func fakeProc(t *testing.T, values map[string]string) SysctlRecord {
	t.Helper()
	dir := t.TempDir()
	r := SysctlRecord{Path: filepath.Join(dir, "record.json"), root: filepath.Join(dir, "sys")}
	for k, v := range values {
		if err := os.MkdirAll(filepath.Dir(r.file(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.file(k), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func readAll(t *testing.T, r SysctlRecord, keys ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		v, err := r.Read(k)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	return out
}

func TestSysctlRecord(t *testing.T) {
	original := map[string]string{ctMax: "262144", kernelPanic: "1"}
	tests := []struct {
		name string
		// run changes the settings as one or more runs do, crashing or not.
		run         func(t *testing.T, r SysctlRecord)
		wantFound   bool
		wantRecord  bool // a record is left after run, before Restore
		wantRestore map[string]string
	}{{
		name: "a run that puts back what it changed",
		run: func(t *testing.T, r SysctlRecord) {
			save(t, r, true, ctMax, kernelPanic, "net.no.such.key")
			write(t, r, ctMax, "1012144")
			restore(t, r, true)
		},
		wantRestore: original,
	}, {
		name: "a crashed run: the next restores the original first",
		run: func(t *testing.T, r SysctlRecord) {
			save(t, r, true, ctMax)
			write(t, r, ctMax, "1012144")
		},
		wantFound: true, wantRecord: true, wantRestore: original,
	}, {
		name: "a run after a crashed one keeps the crashed run's record",
		run: func(t *testing.T, r SysctlRecord) {
			save(t, r, true, ctMax)
			write(t, r, ctMax, "1012144")
			save(t, r, false, ctMax) // finds 1012144, records nothing
			write(t, r, ctMax, "2000000")
		},
		wantFound: true, wantRecord: true, wantRestore: original,
	}, {
		name:        "no record",
		run:         func(t *testing.T, r SysctlRecord) {},
		wantRestore: original,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakeProc(t, original)
			tt.run(t, r)
			_, err := os.Stat(r.Path)
			if got := err == nil; got != tt.wantRecord {
				t.Errorf("record left = %v, want %v", got, tt.wantRecord)
			}
			restore(t, r, tt.wantFound)
			if diff := cmp.Diff(tt.wantRestore, readAll(t, r, ctMax, kernelPanic)); diff != "" {
				t.Errorf("settings after Restore (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(r.Path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the record is still there after Restore: %v", err)
			}
		})
	}
}

func TestSysctlRecordKeepsARecordItCannotRestore(t *testing.T) {
	r := fakeProc(t, map[string]string{ctMax: "262144"})
	save(t, r, true, ctMax)
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(r.file(ctMax)))); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(); err == nil {
		t.Fatal("Restore of a setting it cannot write: no error")
	}
	if _, err := os.Stat(r.Path); err != nil {
		t.Errorf("the record is gone although the setting was not put back: %v", err)
	}
	if err := os.WriteFile(r.Path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(); err == nil {
		t.Error("Restore of a corrupt record: no error")
	}
}

func save(t *testing.T, r SysctlRecord, want bool, keys ...string) {
	t.Helper()
	got, err := r.Save(keys...)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Save wrote a record: %v, want %v", got, want)
	}
}

func write(t *testing.T, r SysctlRecord, key, value string) {
	t.Helper()
	if err := r.Write(key, value); err != nil {
		t.Fatal(err)
	}
}

func restore(t *testing.T, r SysctlRecord, wantFound bool) {
	t.Helper()
	found, err := r.Restore()
	if err != nil {
		t.Fatal(err)
	}
	if found != wantFound {
		t.Fatalf("Restore found a record: %v, want %v", found, wantFound)
	}
}
