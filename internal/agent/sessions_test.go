package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/membership"
)

// sharedGossip stands for the gossip between agents: what each host
// observed is what the others see of it, a host's observation tells the
// others to sync, and the owner of each address is elected by rendezvous
// hashing over the hosts that may own it: for an address advertised over
// BGP, those with an established session of its family.
type sharedGossip struct {
	mu    sync.Mutex
	obs   map[string]membership.Observation
	hooks map[string]membership.Hooks
}

func newSharedGossip() *sharedGossip {
	return &sharedGossip{obs: map[string]membership.Observation{}, hooks: map[string]membership.Hooks{}}
}

// member is host's Membership.
func (s *sharedGossip) member(host string) Membership { return gossipView{s: s, host: host} }

type gossipView struct {
	s    *sharedGossip
	host string
}

func (v gossipView) Run(ctx context.Context, hooks membership.Hooks) error {
	v.s.mu.Lock()
	v.s.hooks[v.host] = hooks
	v.s.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (v gossipView) Observe(o membership.Observation) {
	v.s.mu.Lock()
	changed := !slices.Equal(o.Sessions, v.s.obs[v.host].Sessions)
	v.s.obs[v.host] = o
	var others []membership.Hooks
	for h, hk := range v.s.hooks {
		if h != v.host && changed {
			others = append(others, hk)
		}
	}
	v.s.mu.Unlock()
	for _, hk := range others {
		hk.Sync(false)
	}
}

// Successor: none; these tests' agents stop for good (Config.ForGood nil).
func (v gossipView) Successor(netip.Addr, bool) string { return "" }

func (v gossipView) Status() membership.Status {
	return membership.Status{State: membership.StateReady}
}

func (v gossipView) Owns(vip netip.Addr) bool {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	family := "ipv6"
	if vip.Is4() {
		family = "ipv4"
	}
	var hosts []string
	for h, o := range v.s.obs {
		if !v.s.obs[v.host].Advertised[vip] || slices.Contains(o.Sessions, family) {
			hosts = append(hosts, h)
		}
	}
	return membership.Owner(vip, hosts) == v.host
}

// countingAnnouncer counts the routes it was given.
type countingAnnouncer struct {
	recordingAnnouncer
	sets atomic.Int32
}

func (c *countingAnnouncer) Set(routes []bgp.Route) {
	c.recordingAnnouncer.Set(routes)
	c.sets.Add(1)
}

// TestHostWithoutSessionDoesNotAdvertise: of two hosts serving a proxy
// BGP pool, the one whose sessions are down owns and advertises none of
// its addresses (they would be black-holed), the one with a session
// advertises them all; when the first one's session comes back they share
// them again, each address advertised by one host.
func TestHostWithoutSessionDoesNotAdvertise(t *testing.T) {
	var addrs []string
	for i := range 8 {
		addrs = append(addrs, fmt.Sprintf("192.0.2.%d", 10+i))
	}
	noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
	lb := newLB("proxy", noCheck, withAddresses(addrs...), withAnnounce(v1alpha1.AnnounceBGP, ""), withForwarding(v1alpha1.ForwardingProxy))
	gossip := newSharedGossip()
	anns := map[string]*countingAnnouncer{}
	agents := map[string]*Agent{}
	for _, host := range []string{"lb-1", "lb-2"} {
		anns[host] = &countingAnnouncer{}
		agents[host] = testAgent(t, Config{DataPlane: &failingDataPlane{}, Membership: gossip.member(host), Announcer: anns[host]}, lb.DeepCopy())
		agents[host].cfg.Host = host
	}
	tor := bgp.Peer{Name: "tor", Address: netip.MustParseAddr("192.0.2.1"), Families: []string{"ipv4"}}
	agents["lb-2"].bgpSessionChanged(tor, true)
	for _, a := range agents {
		runAgent(t, a)
	}
	advertised := func(want map[string]int) func() bool {
		return func() bool {
			for host, n := range want {
				if len(anns[host].prefixes()) != n {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "lb-2 to advertise every address, lb-1 to have synced", func() bool {
		return advertised(map[string]int{"lb-2": len(addrs)})() && anns["lb-1"].sets.Load() > 0
	})
	if got := anns["lb-1"].prefixes(); len(got) > 0 {
		t.Fatalf("lb-1, without a BGP session, advertises %v", got)
	}

	agents["lb-1"].bgpSessionChanged(tor, true)
	waitFor(t, "the hosts to share the addresses", func() bool {
		one, two := anns["lb-1"].prefixes(), anns["lb-2"].prefixes()
		return len(one) > 0 && len(two) > 0 && len(one)+len(two) == len(addrs)
	})
	all := append(anns["lb-1"].prefixes(), anns["lb-2"].prefixes()...)
	want := make([]string, 0, len(addrs))
	for _, a := range addrs {
		want = append(want, a+"/32")
	}
	if diff := cmp.Diff(want, all, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("advertised by the two hosts (-want +got):\n%s", diff)
	}

	agents["lb-1"].bgpSessionChanged(tor, false)
	waitFor(t, "lb-2 to advertise every address again", advertised(map[string]int{"lb-1": 0, "lb-2": len(addrs)}))
}

// failingSpeaker stands for a speaker whose sessions were up and that then
// fails: Run returns an error once fail is closed.
type failingSpeaker struct {
	recordingAnnouncer
	fail chan struct{}
}

func (s *failingSpeaker) Run(ctx context.Context) error {
	select {
	case <-s.fail:
		return errors.New("injected speaker failure")
	case <-ctx.Done():
		return nil
	}
}

// A host whose speaker fails tells membership it has no session left (its
// sessions end with it, whether or not it reported them down), so that the
// others advertise its share.
func TestSpeakerFailureEndsTheSessions(t *testing.T) {
	owner := &observingMembership{}
	sp := &failingSpeaker{fail: make(chan struct{})}
	a := testAgent(t, Config{DataPlane: &failingDataPlane{}, Membership: owner, Announcer: sp, BGP: sp})
	a.bgpSessionChanged(bgp.Peer{Name: "tor", Families: []string{"ipv4", "ipv6"}}, true)
	runAgent(t, a)
	sessions := func(want ...string) func() bool {
		return func() bool {
			owner.mu.Lock()
			defer owner.mu.Unlock()
			return len(owner.obs) > 0 && slices.Equal(owner.obs[len(owner.obs)-1].Sessions, want)
		}
	}
	waitFor(t, "a sync that reports both sessions' families", sessions("ipv4", "ipv6"))
	close(sp.fail)
	waitFor(t, "a sync that reports no session", sessions())
}
