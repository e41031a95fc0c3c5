package membership

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCandidatesOfGroup(t *testing.T) {
	edge := Group("example.net/edge=true")
	g := candidateGroups{
		"lb-1": {edge},
		"lb-2": {},
		"lb-3": nil, // publishes no groups: an older agent, in every group
	}
	cands := []string{"lb-1", "lb-2", "lb-3"}
	if diff := cmp.Diff([]string{"lb-1", "lb-3"}, g.in(cands, edge)); diff != "" {
		t.Errorf("candidates of the edge group (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(cands, g.in(cands, "")); diff != "" {
		t.Errorf("candidates of every host (-want +got):\n%s", diff)
	}
	// Whatever the order of rendezvous scores, an address of the group is
	// never owned by a host outside it.
	for i := range 256 {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		if o := Owner(vip, g.in(cands, edge)); o == "lb-2" {
			t.Fatalf("%s of the edge group is owned by lb-2, which is not in it", vip)
		}
	}
}

func TestMetaGroups(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []byte
		want []string
	}{
		{"none", encodeMeta(meta{State: StateReady}), []string{}},
		{"some", encodeMeta(meta{State: StateReady, Groups: []string{"0a0b0c0d"}}), []string{"0a0b0c0d"}},
		{"an older member publishes none: every group", []byte(`{"v":1,"state":"Ready"}`), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := decodeMeta(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if (m.Groups == nil) != (tt.want == nil) || !cmp.Equal(m.Groups, tt.want) {
				t.Errorf("groups = %#v, want %#v", m.Groups, tt.want)
			}
		})
	}
}

// TestMaxGroupsFitMeta: MaxGroups groups fit memberlist's 512 bytes of
// metadata with the rest of it.
func TestMaxGroupsFitMeta(t *testing.T) {
	m := meta{State: StateHoldDown, MAC: "02:00:00:00:00:01"}
	for i := range MaxGroups {
		m.Groups = append(m.Groups, Group(fmt.Sprintf("rack=r%d", i)))
	}
	if n := len(encodeMeta(m)); n > 512 {
		t.Errorf("metadata with %d groups is %d bytes, over memberlist's 512", MaxGroups, n)
	}
}
