package config

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

func TestParseBGP(t *testing.T) {
	in := "[Global]\nregion = eu\n" +
		"[Pool \"edge\"]\naddresses = 192.0.2.0/28\nannounce = BGP\nhosts = node-restriction.kubernetes.io/edge=true\n" +
		"bgp-community = 64512:100\nbgp-community = 1:2\nbgp-local-preference = 200\n" +
		"[BGPPeer \"tor\"]\naddress = fd00::1\nasn = 64512\nlocal-asn = 4200000000\nhold-time = 3s\n"
	cfg, err := Parse("cloud.conf", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	pref := uint32(200)
	wantPool := newPool("edge", withRange("192.0.2.0", "192.0.2.15"), func(p *Pool) {
		p.Announce = AnnounceBGP
		p.Hosts = labels.SelectorFromSet(labels.Set{"node-restriction.kubernetes.io/edge": "true"})
		p.Communities = []Community{{64512, 100}, {1, 2}}
		p.LocalPreference = &pref
	})
	wantPeer := &BGPPeer{
		Name: "tor", Address: netip.MustParseAddr("fd00::1"), ASN: 64512, LocalASN: 4200000000, Port: 179,
		HoldTime: 3 * time.Second, KeepaliveTime: time.Second, Families: []string{"ipv6"}, Hosts: labels.Everything(),
	}
	if diff := cmp.Diff([]*Pool{wantPool}, cfg.Pools, cmpConfig); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]*BGPPeer{wantPeer}, cfg.BGPPeers, cmpConfig); diff != "" {
		t.Errorf("peers (-want +got):\n%s", diff)
	}
}

func TestParseBGPBad(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2
	tests := []struct {
		name string
		in   string
		want []problem
	}{
		{
			name: "bgp pool without peers",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\nannounce = bgp\n",
			want: []problem{{3, `announce: bgp needs at least one [BGPPeer "name"] section`}},
		},
		{
			name: "bgp attributes on an l2 pool",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\nbgp-community = 1:1\n",
			want: []problem{{3, "announce: bgp-community and bgp-local-preference need announce = bgp"}},
		},
		{
			name: "bad values, each with its line",
			in: global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n" +
				"announce = ospf\n" + // 5
				"hosts = a b c\n" + // 6
				"bgp-community = 70000:1\n" + // 7
				"[BGPPeer \"r\"]\n" + // 8
				"address = router\n" + // 9
				"asn = 0\n" + // 10
				"local-asn = -1\n" + // 11
				"hold-time = 1.5s\n" + // 12
				"multihop = 0\n" + // 13
				"family = l2vpn\n" + // 14
				"password-file = secret\n", // 15
			want: []problem{
				{5, `"ospf" is not a way to announce; use l2 or bgp`},
				{6, `"a b c" is not a label selector`},
				{7, `"70000:1" is not a community`},
				{9, `"router" is not an IPv4 or IPv6 address`},
				{10, `"0" is not an ASN`},
				{11, `"-1" is not an ASN`},
				{12, `"1.5s" is not a duration in whole seconds`},
				{13, `"0" is not a hop count`},
				{14, `"l2vpn" is not an address family`},
				{15, `"secret" is not an absolute path`},
			},
		},
		{
			name: "rules across keys and peers",
			in: global +
				"[BGPPeer \"a\"]\naddress = 10.0.0.1\nasn = 1\nlocal-asn = 1\nhold-time = 2s\nmultihop = 2\nsource-address = fd00::2\n" + // 3-9
				"[BGPPeer \"b\"]\naddress = 10.0.0.1\nasn = 2\nlocal-asn = 1\nhold-time = 9s\nkeepalive-time = 9s\n", // 10-15
			want: []problem{
				{3, "source-address: fd00::2 is not of the family of address 10.0.0.1"},
				{3, "multihop: applies to eBGP only"},
				{7, `hold-time: "2s" is below 3s`},
				{10, "keepalive-time: 9s is not less than hold-time 9s"},
				{10, `address: 10.0.0.1 is also [BGPPeer "a"] on line 3`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("cloud.conf", []byte(tc.in))
			if cfg != nil {
				t.Errorf("Parse returned a Config with error %v", err)
			}
			checkProblems(t, err, tc.want)
		})
	}
}

// TestParseBGPPeerLimits: what the agents' BGP speaker (GoBGP) or their
// gossip cannot do is refused with the line of each section concerned,
// every problem at once.
func TestParseBGPPeerLimits(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2
	peer := func(name, addr string, extra ...string) string {
		s := "[BGPPeer \"" + name + "\"]\naddress = " + addr + "\nasn = 64512\nlocal-asn = 64513\n"
		for _, e := range extra {
			s += e + "\n"
		}
		return s
	}
	tests := []struct {
		name string
		in   string
		want []problem
	}{
		{
			// GoBGP keys its peers by address: the second would fail and
			// take the host's whole speaker down.
			name: "one router address on two ports",
			in:   global + peer("a", "10.0.0.1") + peer("b", "10.0.0.1", "port = 1179") + peer("c", "10.0.0.2", "port = 1179"), // 3, 7, 12
			want: []problem{{7, `[BGPPeer "b"] address: 10.0.0.1 is also [BGPPeer "a"] on line 3`}},
		},
		{
			// GoBGP takes a hold time of 0 for unset and proposes 90s.
			name: "hold time 0",
			in:   global + peer("a", "10.0.0.1", "hold-time = 0s") + peer("b", "10.0.0.2", "hold-time = 0", "keepalive-time = 5s"), // 3, 8
			want: []problem{
				{7, `[BGPPeer "a"] hold-time: "0s" (no hold timer) is not supported`},
				{12, `[BGPPeer "b"] hold-time: "0" (no hold timer) is not supported`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("cloud.conf", []byte(tc.in))
			if cfg != nil {
				t.Fatalf("Parse returned a Config with error %v", err)
			}
			checkProblems(t, err, tc.want)
		})
	}
}

// TestParseHostSelectorLimit: every host publishes the groups (host
// selectors of pools) it belongs to in its gossip metadata, which holds
// MaxHostSelectors; one more different selector is refused at the pool
// that brings it, pools sharing a selector count once.
func TestParseHostSelectorLimit(t *testing.T) {
	pools := func(n int, selector func(i int) string) string {
		s := "[Global]\nregion = eu\n" // lines 1-2
		for i := range n {
			s += fmt.Sprintf("[Pool \"p%d\"]\naddresses = 10.%d.%d.0/24\nhosts = %s\n", i, i/256, i%256, selector(i))
		}
		return s
	}
	distinct := func(i int) string { return fmt.Sprintf("node-restriction.kubernetes.io/rack=r%d", i) }
	if _, err := Parse("cloud.conf", []byte(pools(MaxHostSelectors, distinct))); err != nil {
		t.Errorf("%d selectors: %v", MaxHostSelectors, err)
	}
	if _, err := Parse("cloud.conf", []byte(pools(MaxHostSelectors+5, func(i int) string { return distinct(i % 3) }))); err != nil {
		t.Errorf("3 selectors in many pools: %v", err)
	}
	_, err := Parse("cloud.conf", []byte(pools(MaxHostSelectors+2, distinct)))
	first := 3 + 3*MaxHostSelectors // the line of pool number MaxHostSelectors+1
	checkProblems(t, err, []problem{
		{first, fmt.Sprintf(`[Pool "p%d"] hosts: "node-restriction.kubernetes.io/rack=r%d" makes %d different host selectors among the pools; at most %d`, MaxHostSelectors, MaxHostSelectors, MaxHostSelectors+1, MaxHostSelectors)},
		{first + 3, fmt.Sprintf(`[Pool "p%d"] hosts: "node-restriction.kubernetes.io/rack=r%d" makes %d different host selectors among the pools; at most %d`, MaxHostSelectors+1, MaxHostSelectors+1, MaxHostSelectors+2, MaxHostSelectors)},
	})
}

// TestParseBFD: bfd = true fills the default timers (300ms, times 3) or
// takes the given ones; bad values, timers without bfd = true and BFD on
// a multihop peer are refused, each with its line, all at once.
func TestParseBFD(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2
	const peer = "[BGPPeer \"r\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\n"
	cfg, err := Parse("cloud.conf", []byte(global+peer+"bfd = true\n"+
		"[BGPPeer \"s\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\nbfd = yes\nbfd-transmit-interval = 100ms\nbfd-receive-interval = 1s\nbfd-detect-multiplier = 5\n"+
		"[BGPPeer \"off\"]\naddress = 10.0.0.3\nasn = 64512\nlocal-asn = 64513\n"))
	if err != nil {
		t.Fatal(err)
	}
	type timers struct {
		On       bool
		Tx, Rx   time.Duration
		Multiple int
	}
	var got []timers
	for _, p := range cfg.BGPPeers {
		got = append(got, timers{p.BFD, p.BFDTransmitInterval, p.BFDReceiveInterval, p.BFDDetectMultiplier})
	}
	want := []timers{
		{true, 300 * time.Millisecond, 300 * time.Millisecond, 3},
		{true, 100 * time.Millisecond, time.Second, 5},
		{false, 0, 0, 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BFD settings (-want +got):\n%s", diff)
	}

	_, err = Parse("cloud.conf", []byte(global+
		peer+ // 3-6
		"bfd = true\n"+ // 7
		"bfd-transmit-interval = 5ms\n"+ // 8
		"bfd-receive-interval = 1500us\n"+ // 9
		"bfd-detect-multiplier = 1\n"+ // 10
		"[BGPPeer \"s\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\n"+ // 11-14
		"bfd-transmit-interval = 61s\n"+ // 15
		"bfd-receive-interval = 100ms\n"+ // 16
		"bfd-detect-multiplier = 256\n"+ // 17
		"[BGPPeer \"m\"]\naddress = 10.0.0.3\nasn = 64512\nlocal-asn = 64513\nmultihop = 2\nbfd = true\n"+ // 18-23
		"[BGPPeer \"n\"]\naddress = 10.0.0.4\nasn = 64512\nlocal-asn = 64513\nbfd-detect-multiplier = 4\n")) // 24-28
	checkProblems(t, err, []problem{
		{8, `"5ms" is not a duration in whole milliseconds from 10ms to 60s`},
		{9, `"1500us" is not a duration in whole milliseconds`},
		{10, `"1" is not a number from 2 to 255`},
		{11, `[BGPPeer "s"] bfd-receive-interval: needs bfd = true`},
		{15, `"61s" is not a duration in whole milliseconds from 10ms to 60s`},
		{17, `"256" is not a number from 2 to 255`},
		{18, `[BGPPeer "m"] bfd: needs a directly connected router`},
		{24, `[BGPPeer "n"] bfd-detect-multiplier: needs bfd = true`},
	})
}

func TestParseGracefulRestart(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2
	const peer = "[BGPPeer \"r\"]\naddress = 10.0.0.1\nasn = 64512\nlocal-asn = 64513\n"
	cfg, err := Parse("cloud.conf", []byte(global+peer+"graceful-restart = true\n"+
		"[BGPPeer \"s\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\ngraceful-restart = true\ngraceful-restart-time = 5m\n"+
		"[BGPPeer \"off\"]\naddress = 10.0.0.3\nasn = 64512\nlocal-asn = 64513\n"))
	if err != nil {
		t.Fatal(err)
	}
	type gr struct {
		On   bool
		Time time.Duration
	}
	var got []gr
	for _, p := range cfg.BGPPeers {
		got = append(got, gr{p.GracefulRestart, p.GracefulRestartTime})
	}
	if diff := cmp.Diff([]gr{{true, 120 * time.Second}, {true, 5 * time.Minute}, {false, 0}}, got); diff != "" {
		t.Errorf("graceful restart (-want +got):\n%s", diff)
	}

	_, err = Parse("cloud.conf", []byte(global+
		peer+ // 3-6
		"graceful-restart = true\n"+ // 7
		"graceful-restart-time = 4096s\n"+ // 8
		"[BGPPeer \"s\"]\naddress = 10.0.0.2\nasn = 64512\nlocal-asn = 64513\n"+ // 9-12
		"graceful-restart-time = 1500ms\n"+ // 13
		"[BGPPeer \"n\"]\naddress = 10.0.0.4\nasn = 64512\nlocal-asn = 64513\ngraceful-restart-time = 60s\n")) // 14-18
	checkProblems(t, err, []problem{
		{8, `"4096s" is not a duration in whole seconds from 1s to 4095s`},
		{13, `"1500ms" is not a duration in whole seconds`},
		{14, `[BGPPeer "n"] graceful-restart-time: needs graceful-restart = true`},
	})
}
