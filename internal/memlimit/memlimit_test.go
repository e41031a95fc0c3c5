package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup, max string
		want              int64
		wantErr           bool
	}{
		{name: "a limit", cgroup: "0::/kubepods/pod1/c1\n", max: "268435456\n", want: 268435456},
		{name: "no limit", cgroup: "0::/kubepods/pod1/c1\n", max: "max\n"},
		{name: "cgroup v1 only", cgroup: "4:memory:/kubepods/pod1\n"},
		{name: "no memory.max (the root cgroup)", cgroup: "0::/\n"},
		{name: "garbage", cgroup: "0::/kubepods/pod1/c1\n", max: "lots\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			self := filepath.Join(dir, "cgroup")
			if err := os.WriteFile(self, []byte(tc.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(dir, "fs")
			if tc.max != "" {
				p, _ := unifiedPath(tc.cgroup)
				if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p, "memory.max"), []byte(tc.max), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cgroupLimit(self, root)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// An explicit GOMEMLIMIT wins: Set leaves the runtime alone.
func TestSetLeavesAnExplicitLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got, err := Set(); got != 0 || err != nil {
		t.Errorf("Set() = %d, %v with GOMEMLIMIT set; want 0, nil", got, err)
	}
}
