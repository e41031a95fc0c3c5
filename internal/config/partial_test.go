package config

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParsePartial: a reader that uses some sections gets those without a
// problem; a section with one is left out, whatever the problem is.
func TestParsePartial(t *testing.T) {
	const (
		global = "[Global]\nregion = eu\n"                                                 // lines 1-2
		tor    = "[BGPPeer \"tor\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\n" // 4 lines
		spine  = "[BGPPeer \"spine\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\n"
		routes = "[Routes]\nenabled = true\nnode-routers = true\n"
	)
	tests := []struct {
		name       string
		in         string
		problems   int
		leftOut    []Section
		peers      []string
		pools      []string
		machines   []string
		routes     Routes
		wantRegion string
	}{
		{
			name:  "sound",
			in:    global + tor + spine + routes,
			peers: []string{"tor", "spine"}, routes: Routes{Enabled: true, NodeRouters: true}, wantRegion: "eu",
		},
		{
			name:     "a machine with a problem",
			in:       global + "[Machine \"web-1\"]\nzone =\n[Machine \"web-2\"]\n" + tor,
			problems: 1, leftOut: []Section{{"Machine", "web-1", 3}},
			machines: []string{"web-2"}, peers: []string{"tor"}, wantRegion: "eu",
		},
		{
			name:     "a pool overlapping another",
			in:       global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n[Pool \"b\"]\naddresses = 192.0.2.8/29\n",
			problems: 1, leftOut: []Section{{"Pool", "b", 5}},
			pools: []string{"a"}, wantRegion: "eu",
		},
		{
			name:     "a peer with a problem",
			in:       global + tor + "hold-time = 1s\n" + spine,
			problems: 1, leftOut: []Section{{"BGPPeer", "tor", 3}},
			peers: []string{"spine"}, wantRegion: "eu",
		},
		{
			name:     "a syntax error in a peer",
			in:       global + tor + "password-file /etc/tor\n" + spine,
			problems: 1, leftOut: []Section{{"BGPPeer", "tor", 3}},
			peers: []string{"spine"}, wantRegion: "eu",
		},
		{
			name:     "a peer given twice",
			in:       global + tor + spine + tor,
			problems: 1, leftOut: []Section{{"BGPPeer", "tor", 3}},
			peers: []string{"spine"}, wantRegion: "eu",
		},
		{
			name:     "a peer's unreadable header",
			in:       global + "[BGPPeer tor]\naddress = 10.0.0.1\n" + spine,
			problems: 1, peers: []string{"spine"}, wantRegion: "eu",
		},
		{
			name:     "no [Global]",
			in:       tor,
			problems: 1, peers: []string{"tor"},
		},
		{
			name:     "a problem in [Routes] keeps the rest of it",
			in:       global + routes + "node-router = false\n",
			problems: 1, routes: Routes{Enabled: true, NodeRouters: true}, wantRegion: "eu",
		},
		{
			name:     "a bad value in [Routes] is off",
			in:       global + "[Routes]\nnode-routers = ture\n",
			problems: 1, routes: Routes{Enabled: true}, wantRegion: "eu",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			part := ParsePartial("cloud.conf", []byte(tc.in))
			if len(part.Problems) != tc.problems {
				t.Errorf("problems: %v, want %d", part.Problems, tc.problems)
			}
			if _, err := Parse("cloud.conf", []byte(tc.in)); (err == nil) != (part.Problems == nil) || err != nil && err.Error() != part.Problems.Error() {
				t.Errorf("problems %q, want Parse's %v", part.Problems, err)
			}
			cfg := part.Config
			got := struct {
				LeftOut                []Section
				Peers, Pools, Machines []string
				Routes                 Routes
				Region                 string
			}{part.LeftOut, names(cfg.BGPPeers, func(p *BGPPeer) string { return p.Name }),
				names(cfg.Pools, func(p *Pool) string { return p.Name }), machineNames(cfg), cfg.Routes, cfg.Global.Region}
			want := got
			want.LeftOut, want.Peers, want.Pools, want.Machines, want.Routes, want.Region = tc.leftOut, tc.peers, tc.pools, tc.machines, tc.routes, tc.wantRegion
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func names[T any](list []T, name func(T) string) []string {
	var out []string
	for _, x := range list {
		out = append(out, name(x))
	}
	return out
}

func machineNames(cfg *Config) []string {
	var out []string
	for name := range cfg.Machines {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// FuzzParsePartial: ParsePartial reports what Parse reports, returns what
// Parse returns for a sound file, and leaves out only sections it names.
func FuzzParsePartial(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		part := ParsePartial("fuzz.conf", data)
		cfg, err := Parse("fuzz.conf", data)
		switch {
		case part.Config == nil:
			t.Fatal("ParsePartial returned no Config")
		case err == nil && (part.Problems != nil || part.LeftOut != nil):
			t.Fatalf("sound file: problems %v, left out %v", part.Problems, part.LeftOut)
		case err == nil && !cmp.Equal(cfg, part.Config, cmpConfig):
			t.Fatalf("sound file: Config differs from Parse's (-Parse +ParsePartial):\n%s", cmp.Diff(cfg, part.Config, cmpConfig))
		case err != nil && err.Error() != part.Problems.Error():
			t.Fatalf("problems %q, want Parse's %q", part.Problems, err)
		}
		if len(part.LeftOut) > 0 && part.Problems == nil {
			t.Fatalf("left out %v without a problem", part.LeftOut)
		}
	})
}
