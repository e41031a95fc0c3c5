package clustertest

import (
	"net/netip"
	"testing"

	"github.com/groundcloud/groundcloud/test/images/echo"
)

// TestParseAnswer reads what groundcloud-echo says.
func TestParseAnswer(t *testing.T) {
	for _, remote := range []string{"192.0.2.4:16694", "[2001:db8:0:1::4]:40000"} {
		line := echo.Config{Pod: "web-1", Node: "node-2"}.Answer(remote)
		a, err := parseAnswer(line)
		if err != nil {
			t.Fatal(err)
		}
		want := answer{pod: "web-1", node: "node-2", seen: netip.MustParseAddrPort(remote).Addr()}
		if a != want {
			t.Errorf("parseAnswer(%q) = %+v, want %+v", line, a, want)
		}
	}
	if _, err := parseAnswer("hello"); err == nil {
		t.Error("a short answer parsed")
	}
}
