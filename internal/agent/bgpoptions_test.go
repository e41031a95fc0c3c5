package agent

import (
	"errors"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/groundcloud/groundcloud/internal/bfd"
	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/config"
)

func TestSessionEvents(t *testing.T) {
	rec := record.NewFakeRecorder(4)
	changed := sessionEvents(rec, "lb-1")
	tor := bgp.Peer{Name: "tor", Address: netip.MustParseAddr("10.0.0.1")}
	changed(tor, true, "ESTABLISHED")
	changed(tor, false, "IDLE")
	peerFailedEvents(rec, "lb-1")(tor, errors.New("cannot listen on TCP port 179"))
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal BGPSessionUp BGP session with tor (10.0.0.1) established",
		"Warning BGPSessionDown BGP session with tor (10.0.0.1) is down (state IDLE): the router no longer sends this host the traffic of its addresses",
		"Warning BGPPeerFailed No BGP session with tor (10.0.0.1): cannot listen on TCP port 179. The sessions with the other peers are unaffected",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A BFD session coming Up is a Normal Event, failing a Warning that says
// why, stopped by the router a Normal one; the host's own stop (AdminDown)
// and Init say nothing. BFD that cannot run at all is a Warning naming the peers.
func TestBFDEvents(t *testing.T) {
	rec := record.NewFakeRecorder(8)
	changed := bfdEvents(rec, "lb-1")
	tor := bgp.Peer{Name: "tor", Address: netip.MustParseAddr("10.0.0.1")}
	for _, c := range []bfd.Change{
		{From: bfd.Down, To: bfd.Init},
		{From: bfd.Init, To: bfd.Up},
		{From: bfd.Up, To: bfd.Down, Diag: bfd.DiagTimeExpired},
		{From: bfd.Down, To: bfd.Up},
		{From: bfd.Up, To: bfd.Down, Diag: bfd.DiagNeighborDown, RemoteDiag: bfd.DiagAdminDown},
		{From: bfd.Down, To: bfd.AdminDown, Diag: bfd.DiagAdminDown},
	} {
		changed(tor, c)
	}
	bfdFailedEvents(rec, "lb-1")([]bgp.Peer{tor, {Name: "tor-b"}}, errors.New("listen for BFD on UDP port 3784 (IPv4): address already in use"))
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal BFDSessionUp BFD session with tor (10.0.0.1) is up",
		"Warning BFDSessionDown BFD session with tor (10.0.0.1) is down: detection time expired; the BGP session with it is reset",
		"Normal BFDSessionUp BFD session with tor (10.0.0.1) is up",
		"Normal BFDSessionDown BFD session with tor (10.0.0.1) stopped by the router (administratively down); the BGP session is kept",
		"Warning BFDFailed No BFD sessions with tor, tor-b: listen for BFD on UDP port 3784 (IPv4): address already in use. The BGP sessions run without BFD: a dead link is noticed after the hold time",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// At a node's start the apiserver may not answer yet (kube-proxy has not
// programmed the kubernetes Service): the agent waits for its Node's labels
// instead of exiting; a refusal it cannot outwait ends it.
func TestStartLabelsWaitsForTheAPIServer(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lb-1", Labels: map[string]string{"rack": "a"}}}
	for _, tc := range []struct {
		name    string
		fail    error
		want    labels.Set
		wantErr bool
	}{
		{"unreachable twice", errors.New("dial tcp 10.96.0.1:443: connect: connection refused"), labels.Set{"rack": "a"}, false},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "lb-1", errors.New("no")), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := kubefake.NewClientset(node)
			calls := 0
			cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				calls++
				if calls <= 2 {
					return true, nil, tc.fail
				}
				return false, nil, nil
			})
			o := NewOptions()
			o.Host = "lb-1"
			got, err := o.startLabels(t.Context(), cs.CoreV1().Nodes())
			if (err != nil) != tc.wantErr {
				t.Fatalf("startLabels: %v, want error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}

// A [BGPPeer] with bfd = true gives the speaker a peer with BFD and its
// timers; without, none.
func TestPeerOfBFD(t *testing.T) {
	cfg, err := config.Parse("cloud.conf", []byte("[Global]\nregion = eu\n"+
		"[BGPPeer \"tor\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\nbfd = true\nbfd-transmit-interval = 100ms\n"+
		"[BGPPeer \"plain\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []*bfd.Settings
	for _, p := range cfg.BGPPeers {
		peer, err := peerOf(p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, peer.BFD)
	}
	want := []*bfd.Settings{{DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 300 * time.Millisecond, DetectMult: 3}, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BFD of the peers (-want +got):\n%s", diff)
	}
}
