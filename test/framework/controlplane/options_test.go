package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOptionsValidate(t *testing.T) {
	bin := fakeBinDir(t)
	tests := []struct {
		name string
		opts Options
		want []string // substrings of the error, all reported at once
	}{
		{name: "minimal", opts: Options{BinDir: bin}},
		{
			name: "everything wrong",
			opts: Options{
				ServiceCIDR:        "10.96.0.0",
				Users:              []User{{Name: "admin"}, {Name: "a/b"}, {Name: "x"}, {Name: "x", Groups: []string{"g,h"}}},
				ExtraAPIServerArgs: []string{"--secure-port=1", "--v=4"},
			},
			want: []string{"BinDir is required", "ServiceCIDR", `"admin" is reserved`, `"a/b"`, `duplicate name "x"`, `group "g,h"`, "--secure-port is managed"},
		},
		{name: "missing tools", opts: Options{BinDir: t.TempDir()}, want: []string{"tool etcd", "tool kube-apiserver", "tool kubectl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	got := Options{BinDir: "b"}.withDefaults()
	if got.ServiceCIDR != DefaultServiceCIDR {
		t.Errorf("ServiceCIDR %q", got.ServiceCIDR)
	}
	want := append([]User{{Name: AdminUser, Groups: []string{"system:masters"}}}, DefaultUsers()...)
	if diff := cmp.Diff(want, got.Users); diff != "" {
		t.Errorf("Users (-want +got):\n%s", diff)
	}
	if got := (Options{Users: []User{}}).withDefaults().Users; len(got) != 1 {
		t.Errorf("empty Users: got %v, want only the admin", got)
	}
}

func TestMergeArgs(t *testing.T) {
	got := mergeArgs(
		[]string{"--authorization-mode=Node,RBAC", "--secure-port=1", "--service-cluster-ip-range=10.96.0.0/16"},
		[]string{"--authorization-mode=RBAC", "--v=2"},
	)
	want := []string{"--secure-port=1", "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=RBAC", "--v=2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeArgs (-want +got):\n%s", diff)
	}
}

func TestTokenFile(t *testing.T) {
	users := []User{{Name: "admin", Groups: []string{"system:masters"}}, {Name: "agent", Groups: []string{"a", "b"}}, {Name: "nobody"}}
	got := string(tokenFile(users, map[string]string{"admin": "t1", "agent": "t2", "nobody": "t3"}))
	want := "t1,admin,admin,\"system:masters\"\nt2,agent,agent,\"a,b\"\nt3,nobody,nobody,\"\"\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("token file (-want +got):\n%s", diff)
	}
}

func TestTailLines(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb", 5, "a\nb"},
		{"", 3, ""},
	} {
		if got := tailLines(tt.in, tt.n); got != tt.want {
			t.Errorf("tailLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !goModDeclares(filepath.Join(root, "go.mod"), modulePath) {
		t.Errorf("RepoRoot %s: go.mod does not declare %s", root, modulePath)
	}
	if goModDeclares(filepath.Join(root, "hack", "tools", "go.mod"), modulePath) {
		t.Errorf("the tools module must not count as the repository")
	}
}

// fakeBinDir holds executable files named like the tools.
func fakeBinDir(t *testing.T) string {
	dir := t.TempDir()
	for _, name := range toolNames {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
