package bench

import (
	"io"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// splitAtVIP splits each sample's time from address to first connection
// where the agent added the address to its interface: the last "Added
// virtual IPs" line of the agent's log naming it before the connection.
// Address to VIP is the agent's part (the sync that took the Service, and
// the wait for it); VIP to connection is the network's and the client's
// (neighbour resolution, the dial). The first is negative when the agent
// added the address before the benchmark saw it in the Service's status.
// Samples whose address the log does not name are left out, and said.
func (s *scaleEnv) splitAtVIP(t *testing.T, samples []sampled) (toVIP, fromVIP []time.Duration) {
	t.Helper()
	var ref time.Time
	for _, x := range samples {
		if x.done.After(ref) {
			ref = x.done
		}
	}
	adds := map[netip.Addr][]time.Time{}
	for _, path := range s.agentLogs() {
		f, err := os.Open(path)
		if err != nil {
			t.Logf("agent log: %v; samples not split", err)
			return nil, nil
		}
		a, err := parseVIPAdds(f, ref)
		f.Close()
		if err != nil {
			t.Logf("agent log %s: %v; samples not split", path, err)
			return nil, nil
		}
		for ip, at := range a {
			adds[ip] = append(adds[ip], at...)
		}
	}
	missing := 0
	for _, x := range samples {
		var added time.Time
		for _, a := range adds[x.ip] {
			if !a.After(x.done) && a.After(added) {
				added = a
			}
		}
		if added.IsZero() {
			missing++
			continue
		}
		toVIP = append(toVIP, added.Sub(x.at))
		fromVIP = append(fromVIP, x.done.Sub(added))
	}
	if missing > 0 {
		t.Logf("%d of %d samples: the agent's log does not say when it added the address", missing, len(samples))
	}
	return toVIP, fromVIP
}

// vipAddLine is the vip manager's log line for added addresses, in klog's
// text format: `I1202 12:21:47.128943   123 manager.go:241] "Added
// virtual IPs" ... addresses=["192.0.2.1","2001:db8::1"]`.
var vipAddLine = regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s.*\] "Added virtual IPs" .*addresses=\[([^\]]*)\]`)

// parseVIPAdds returns when each address was added, in log order. klog's
// header has no year: it is ref's, or the one before when that would put
// the line more than a day after ref.
func parseVIPAdds(r io.Reader, ref time.Time) (map[netip.Addr][]time.Time, error) {
	out := map[netip.Addr][]time.Time{}
	var bad error
	err := logLines(r, func(line string) {
		m := vipAddLine.FindStringSubmatch(line)
		if m == nil || bad != nil {
			return
		}
		at, err := time.ParseInLocation("2006 0102 15:04:05.000000", ref.Format("2006")+" "+m[1], time.Local)
		if err != nil {
			bad = err
			return
		}
		if at.After(ref.Add(24 * time.Hour)) {
			at = at.AddDate(-1, 0, 0)
		}
		for _, q := range strings.Split(m[2], ",") {
			a, err := netip.ParseAddr(strings.Trim(q, `"`))
			if err != nil {
				bad = err
				return
			}
			out[a] = append(out[a], at)
		}
	})
	if bad != nil {
		return nil, bad
	}
	return out, err
}

func TestParseVIPAdds(t *testing.T) {
	log := `I1202 12:21:47.128943   12345 manager.go:241] "Added virtual IPs" logger="vip" host="lb-1" interface="eth0" addresses=["192.0.2.201","2001:db8::c8"]
I1202 12:21:48.000001   12345 agent.go:100] "Synced" services=2
I1202 12:21:49.500000   12345 manager.go:238] "Removed virtual IPs" logger="vip" addresses=["192.0.2.201"]
I1202 12:21:53.241192   12345 manager.go:241] "Added virtual IPs" logger="vip" host="lb-1" interface="eth0" addresses=["192.0.2.201"]
`
	ref := time.Date(2026, 12, 2, 13, 0, 0, 0, time.Local)
	got, err := parseVIPAdds(strings.NewReader(log), ref)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04:05.000000", s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v4, v6 := netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c8")
	if len(got) != 2 || len(got[v4]) != 2 || len(got[v6]) != 1 {
		t.Fatalf("got %v, want 192.0.2.201 added twice and 2001:db8::c8 once", got)
	}
	if !got[v4][0].Equal(at("2026-12-02 12:21:47.128943")) || !got[v4][1].Equal(at("2026-12-02 12:21:53.241192")) || !got[v6][0].Equal(got[v4][0]) {
		t.Errorf("times %v / %v", got[v4], got[v6])
	}
	// Just after new year, a line of 31 December is of the year before.
	got, err = parseVIPAdds(strings.NewReader(`I1231 23:59:59.000000   1 manager.go:241] "Added virtual IPs" addresses=["192.0.2.1"]`+"\n"), time.Date(2027, 1, 1, 0, 0, 5, 0, time.Local))
	if err != nil {
		t.Fatal(err)
	}
	if a := got[netip.MustParseAddr("192.0.2.1")]; len(a) != 1 || a[0].Year() != 2026 {
		t.Errorf("got %v, want one time in 2026", a)
	}
	if _, err := parseVIPAdds(strings.NewReader(`I1202 12:21:47.128943   1 m.go:1] "Added virtual IPs" addresses=["not-an-ip"]`+"\n"), ref); err == nil {
		t.Error("an address that does not parse: no error")
	}
	// A container log as the kubelet writes it, a long line in two parts.
	cri := `2026-12-02T12:21:47.200000000Z stderr F I1202 12:21:47.128943   1 manager.go:241] "Added virtual IPs" addresses=["192.0.2.7"]
2026-12-02T12:21:48.200000000Z stderr P I1202 12:21:48.000000   1 manager.go:241] "Added virtual IPs" addresses=["192.0.2.8",
2026-12-02T12:21:48.200000000Z stderr F "192.0.2.9"]
`
	got, err = parseVIPAdds(strings.NewReader(cri), ref)
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]string{"192.0.2.7": "2026-12-02 12:21:47.128943", "192.0.2.8": "2026-12-02 12:21:48.000000", "192.0.2.9": "2026-12-02 12:21:48.000000"} {
		if a := got[netip.MustParseAddr(ip)]; len(a) != 1 || !a[0].Equal(at(want)) {
			t.Errorf("%s: got %v, want %s", ip, a, want)
		}
	}
}
