package realcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHostStateDiff(t *testing.T) {
	before := HostState{"routes": {"a", "b", "b"}, "mounts": {"/ ext4"}}
	after := HostState{"routes": {"b", "c", "b"}, "mounts": {"/ ext4", "/x tmpfs"}}
	want := []string{"mounts: added: /x tmpfs", "routes: gone: a", "routes: added: c"}
	if diff := cmp.Diff(want, before.Diff(after)); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
	if d := before.Diff(before); len(d) != 0 {
		t.Errorf("a state differs from itself: %v", d)
	}
}
