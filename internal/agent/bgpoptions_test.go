package agent

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"

	"github.com/groundcloud/groundcloud/internal/bgp"
)

func TestSessionEvents(t *testing.T) {
	rec := record.NewFakeRecorder(4)
	changed := sessionEvents(rec, "lb-1")
	tor := bgp.Peer{Name: "tor", Address: netip.MustParseAddr("10.0.0.1")}
	changed(tor, true, "ESTABLISHED")
	changed(tor, false, "IDLE")
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal BGPSessionUp BGP session with tor (10.0.0.1) established",
		"Warning BGPSessionDown BGP session with tor (10.0.0.1) is down (state IDLE): the router no longer sends this host the traffic of its addresses",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
