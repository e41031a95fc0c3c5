package membership

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGossipHealth(t *testing.T) {
	t0 := time.Unix(1000, 0)
	nameOf := func(ip string) string {
		if ip == "192.0.2.3" {
			return "lb-b"
		}
		return ""
	}
	g := newGossipErrors()
	if h := g.health(t0, nil, nameOf, 7947); !h.OK() {
		t.Fatalf("no errors yet: %+v", h)
	}
	if !g.record(GossipErrorDecrypt, "192.0.2.3:41234", t0) {
		t.Error("the first error from a peer is logged")
	}
	if g.record(GossipErrorDecrypt, "192.0.2.3:50000", t0.Add(time.Second)) {
		t.Error("the same error from the same host a second later is logged again")
	}
	if !g.record(GossipErrorDecrypt, "192.0.2.4:7947", t0.Add(time.Second)) {
		t.Error("an error from another host is logged")
	}
	if !g.record(GossipErrorJoin, "192.0.2.3:7947", t0.Add(time.Second)) {
		t.Error("another kind of error is logged")
	}
	// A host heard serving but not joined counts once it has lasted.
	if h := g.health(t0.Add(2*time.Second), []string{"lb-c"}, nameOf, 7947); strings.Contains(h.Message, "lb-c") {
		t.Errorf("a host not joined for a moment is a problem: %+v", h)
	}
	h := g.health(t0.Add(12*time.Second), []string{"lb-c"}, nameOf, 7947)
	want := GossipHealth{
		Reason: GossipDecryptFailed,
		Message: "gossip from lb-b (192.0.2.3), 192.0.2.4 cannot be decrypted: its gossip key differs from this host's; " +
			"lb-c hold addresses on the link but are not gossip members: check that every agent has the same gossip key and that port 7947 (UDP and TCP) is open between them",
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("health (-want +got):\n%s", diff)
	}
	// Decrypt failures lapse after a minute without any; hosts heard but
	// not joined remain a problem.
	h = g.health(t0.Add(2*time.Minute), []string{"lb-c"}, nameOf, 7947)
	if h.Reason != GossipNotJoined {
		t.Errorf("health %+v, want %s", h, GossipNotJoined)
	}
	if h = g.health(t0.Add(2*time.Minute), nil, nameOf, 7947); !h.OK() {
		t.Errorf("health %+v, want healthy", h)
	}
	if h = g.health(t0.Add(2*time.Minute+time.Second), []string{"lb-c"}, nameOf, 7947); !h.OK() {
		t.Errorf("not joined again, for a moment: %+v, want healthy", h)
	}
	if !g.record(GossipErrorDecrypt, "192.0.2.3:41234", t0.Add(10*time.Minute)) {
		t.Error("an error is logged again after the rate limit")
	}
}

func TestDecryptFailure(t *testing.T) {
	tests := []struct {
		line string
		from string
		ok   bool
	}{
		{"memberlist: Decrypt packet failed: no installed keys could decrypt the message from=192.0.2.3:7947", "192.0.2.3:7947", true},
		{"memberlist: failed to receive: No installed keys could decrypt the message from=192.0.2.3:41234", "192.0.2.3:41234", true},
		{"memberlist: Failed to join 192.0.2.3:7947: no installed keys could decrypt the message", "192.0.2.3:7947", true},
		{"memberlist: Failed to send gossip to 192.0.2.3:7947: write: connection refused", "", false},
		{"memberlist: Encryption of message failed: boom", "", false},
	}
	for _, tt := range tests {
		from, ok := decryptFailure(tt.line)
		if from != tt.from || ok != tt.ok {
			t.Errorf("decryptFailure(%q) = %q, %v; want %q, %v", tt.line, from, ok, tt.from, tt.ok)
		}
	}
}
