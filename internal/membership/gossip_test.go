package membership

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

// testMember is a Gossip on the loopback interface.
type testMember struct {
	*Gossip
	stop context.CancelFunc
	done chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		ln.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func startMember(t *testing.T, name string, port int, seeds []string, obs Observation) *testMember {
	t.Helper()
	return startMemberWithKey(t, name, port, seeds, obs, []byte("0123456789abcdef0123456789abcdef"))
}

func startMemberWithKey(t *testing.T, name string, port int, seeds []string, obs Observation, key []byte) *testMember {
	t.Helper()
	o := NewOptions()
	cfg := Config{
		Name: name, Interface: "lo", BindHost: "127.0.0.1", BindPort: port, Seeds: seeds,
		Key:           key,
		ProbeInterval: o.ProbeInterval, ProbeTimeout: o.ProbeTimeout, SuspicionMult: o.SuspicionMult,
		HoldDown: 2 * time.Second, ConflictProbeInterval: time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &testMember{Gossip: New(cfg), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.Run(ctx, Hooks{Sync: func(bool) {}, Announce: func() {}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
	m.Observe(obs)
	t.Cleanup(m.close)
	return m
}

func (m *testMember) close() {
	m.stop()
	<-m.done
}

// owners asks every member which addresses it owns; an address owned by
// none or several is an error.
func owners(members map[string]*testMember, all []netip.Addr) (map[netip.Addr]string, error) {
	out := map[netip.Addr]string{}
	for _, v := range all {
		for name, m := range members {
			if !m.Owns(v) {
				continue
			}
			if prev, ok := out[v]; ok {
				return nil, fmt.Errorf("%s owned by %s and %s", v, prev, name)
			}
			out[v] = name
		}
		if _, ok := out[v]; !ok {
			return nil, fmt.Errorf("%s owned by none", v)
		}
	}
	return out, nil
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < limit {
		if err = cond(); err == nil {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, limit, err)
	return 0
}

// TestGossipFailover runs three members over loopback: they agree on
// owners, a member that leaves hands over only its own addresses, a
// returning one waits its hold-down and then takes back only its share,
// and an unhealthy one gives its addresses away.
func TestGossipFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets and waits for failure detection")
	}
	all := vips(30)
	obs := Observation{VIPs: all, NodesReachable: true}
	names := []string{"lb-1", "lb-2", "lb-3"}
	ports := map[string]int{}
	var seeds []string
	for _, n := range names {
		ports[n] = freePort(t)
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", ports[n]))
	}
	members := map[string]*testMember{}
	var mu sync.Mutex
	for _, n := range names {
		members[n] = startMember(t, n, ports[n], seeds, obs)
	}
	snapshot := func() (map[netip.Addr]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return owners(members, all)
	}
	allReady := func(want int) func() error {
		return func() error {
			o, err := snapshot()
			if err != nil {
				return err
			}
			hosts := map[string]bool{}
			for _, h := range o {
				hosts[h] = true
			}
			if len(hosts) != want {
				return fmt.Errorf("owners %v", hosts)
			}
			return nil
		}
	}
	waitFor(t, "three owners agree", 10*time.Second, allReady(3))
	before, _ := snapshot()
	if diff := Owners(all, names); fmt.Sprint(diff) != fmt.Sprint(before) {
		t.Errorf("owners %v, want Owners() = %v", before, diff)
	}

	// lb-2 leaves: only its addresses move.
	mu.Lock()
	members["lb-2"].close()
	delete(members, "lb-2")
	mu.Unlock()
	took := waitFor(t, "lb-2's addresses taken over", 5*time.Second, allReady(2))
	t.Logf("takeover after a leave: %s", took)
	after, _ := snapshot()
	for v, h := range before {
		if h != "lb-2" && after[v] != h {
			t.Errorf("%s moved from %s to %s though %s stayed", v, h, after[v], h)
		}
	}

	// lb-2 returns: nothing for the hold-down, then exactly its share.
	back := startMember(t, "lb-2", ports["lb-2"], seeds, obs)
	mu.Lock()
	members["lb-2"] = back
	mu.Unlock()
	time.Sleep(time.Second)
	if st := back.Status(); st.State != StateHoldDown {
		t.Errorf("returning member is %s, want HoldDown", st.State)
	}
	for _, v := range all {
		if back.Owns(v) {
			t.Errorf("returning member owns %s during its hold-down", v)
		}
	}
	waitFor(t, "lb-2 takes its share back", 5*time.Second, allReady(3))
	again, _ := snapshot()
	if fmt.Sprint(again) != fmt.Sprint(before) {
		t.Errorf("after the return owners %v, want the first ones %v", again, before)
	}

	// lb-3 can reach no node: its addresses move, nothing else does.
	members["lb-3"].Observe(Observation{VIPs: all, NodesReachable: false})
	waitFor(t, "lb-3's addresses move", 5*time.Second, allReady(2))
	if st := members["lb-3"].Status(); st.State != StateUnhealthy || st.Problem == "" {
		t.Errorf("lb-3 status %+v", st)
	}
	sick, _ := snapshot()
	for v, h := range before {
		if h != "lb-3" && sick[v] != h {
			t.Errorf("%s moved from %s to %s when lb-3 went unhealthy", v, h, sick[v])
		}
	}
}

// TestGossipDifferentKeys: two members with different gossip keys cannot
// gossip; each says so in its Status (and so in LoadBalancer status), as
// soon as the other's messages fail to decrypt.
func TestGossipDifferentKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("opens gossip sockets")
	}
	RegisterMetrics()
	obs := Observation{VIPs: vips(4), NodesReachable: true}
	pa, pb := freePort(t), freePort(t)
	seeds := []string{fmt.Sprintf("127.0.0.1:%d", pa), fmt.Sprintf("127.0.0.1:%d", pb)}
	a := startMemberWithKey(t, "lb-a", pa, seeds, obs, []byte("0123456789abcdef0123456789abcdef"))
	b := startMemberWithKey(t, "lb-b", pb, seeds, obs, []byte("fedcba9876543210fedcba9876543210"))
	for _, m := range []*testMember{a, b} {
		waitFor(t, m.cfg.Name+" reports that gossip cannot be decrypted", 15*time.Second, func() error {
			if g := m.Status().Gossip; g.Reason != GossipDecryptFailed || !strings.Contains(g.Message, "127.0.0.1") {
				return fmt.Errorf("gossip health %+v", g)
			}
			return nil
		})
	}
	if got, _ := testutil.GetCounterMetricValue(gossipErrorCount.WithLabelValues(GossipErrorDecrypt)); got == 0 {
		t.Errorf("groundcloud_membership_gossip_errors_total{reason=Decrypt} = %v, want > 0", got)
	}
	if got, _ := testutil.GetCounterMetricValue(gossipErrorCount.WithLabelValues(GossipErrorJoin)); got == 0 {
		t.Errorf("groundcloud_membership_gossip_errors_total{reason=Join} = %v, want > 0", got)
	}
}
