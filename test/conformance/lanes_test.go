package conformance

import (
	"strings"
	"testing"
)

func TestParseLanes(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: []string{DefaultLane}},
		{in: "all", want: Lanes},
		{in: "ipv6-bgp-proxy, dual-l2-passthrough", want: []string{"ipv6-bgp-proxy", "dual-l2-passthrough"}},
		{in: "ipv4-l2", wantErr: "want <family>-<announce>-<forwarding>"},
		{in: "ipv5-l3-nat", wantErr: `family "ipv5": want ipv4, ipv6 or dual; announce "l3": want l2 or bgp; forwarding "nat"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLanes(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLanes(%q) = %v, %v; want error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range got {
				names = append(names, l.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ParseLanes(%q) = %v, want %v", tt.in, names, tt.want)
			}
		})
	}
}

func TestEveryLaneParses(t *testing.T) {
	for _, name := range Lanes {
		if _, err := ParseLane(name); err != nil {
			t.Error(err)
		}
	}
}

func TestSkips(t *testing.T) {
	skips, err := ParseSkips([]byte(`# comment
*-proxy | should work for type=LoadBalancer | upstream skips it in Proxy mode
ipv6-l2-passthrough, dual-* | target all nodes | reason two
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(For(skips, "dual-l2-proxy")); got != 2 {
		t.Errorf("dual-l2-proxy has %d skips, want 2", got)
	}
	if got := len(For(skips, "ipv4-l2-passthrough")); got != 0 {
		t.Errorf("ipv4-l2-passthrough has %d skips, want 0", got)
	}
	lane := For(skips, "ipv4-bgp-proxy")
	if re := SkipRegexp(lane); re != `should work for type=LoadBalancer` {
		t.Errorf("SkipRegexp = %q", re)
	}
	if _, ok := Listed(lane, "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work for type=LoadBalancer"); !ok {
		t.Error("Listed: want the spec found")
	}
	_, err = ParseSkips([]byte("a | b\n* | | none\n[ | x | y\n"))
	for _, want := range []string{"line 1: want", "line 2: a skip needs a spec and a reason", `line 3: lane pattern "["`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSkips: error %v, want it to say %q", err, want)
		}
	}
}

func TestSkipsFileParses(t *testing.T) {
	data, err := readSkips()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSkips(data); err != nil {
		t.Error(err)
	}
}
