package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/membership"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestGossipKeysDiffer has two LB hosts whose agents were given different
// gossip keys, so they can never gossip. They still share the addresses
// as one cluster would: each names the other from the link-layer address
// it publishes in status and hears it serve on the link, so every address
// settles on one host and stays there (no ARP flapping), and a restarted
// agent does not claim everything. The failure shows as a Gossip condition
// in status, a metric and a log line at the default level.
func TestGossipKeysDiffer(t *testing.T) {
	env := startHAEnvKeys(t, 2, true, true)
	names := []string{env.LBs[0].Name, env.LBs[1].Name}
	var vips []netip.Addr
	var want map[netip.Addr]string

	t.Run("every address settles on one host and stays there", func(t *testing.T) {
		// Enough Services that each host owns some.
		for i := 0; i < 12; i++ {
			vips = append(vips, env.createServices(t, fmt.Sprintf("keys-%d", i), 1)...)
			want = membership.Owners(vips, names)
			if i >= 3 && ownsSome(want, names) {
				break
			}
		}
		t.Logf("owners by rendezvous hashing over both hosts: %v", want)
		// At start each agent is alone until it hears the other serve on
		// the link and reads its status; a busy machine can keep an early
		// split still for a few seconds, so the owners are compared once
		// they have been still for 2 s and are as if the two gossiped.
		var got map[netip.Addr]string
		deadline := time.Now().Add(time.Minute)
		for {
			got = env.settle(t, vips, 2*time.Second)
			if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("owners %v, want %v (as if the two gossiped)", got, want)
		}

		// Ten quiet seconds: no address changes hands, and each is
		// announced by one station only.
		ann := watchAnnouncements(t, env.inside, vips)
		start := time.Now()
		time.Sleep(10 * time.Second)
		heard := ann.stop()
		for _, v := range vips {
			if ch := env.holders.Changes(v, start); len(ch) != 1 || !slices.Equal(ch[0].Hosts, []string{want[v]}) {
				t.Errorf("%s changed hands in 10 s: %v", v, ch)
			}
			if len(heard[v]) > 1 {
				t.Errorf("%s announced by %d stations in 10 s: %v", v, len(heard[v]), heard[v])
			}
		}
		t.Logf("gratuitous ARP in 10 s, by address and station: %v", heard)
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("the failure is visible: Gossip condition, metric, log", func(t *testing.T) {
		for i, h := range env.LBs {
			eventually(t, "Gossip False (DecryptFailed) for "+h.Name+" in status", func() bool {
				_, lb := env.statusHost(t, "keys-0-0", netip.Addr{})
				for _, hs := range lb.Status.Hosts {
					if c := meta.FindStatusCondition(hs.Conditions, "Gossip"); hs.Name == h.Name && c != nil &&
						c.Status == metav1.ConditionFalse && c.Reason == membership.GossipDecryptFailed {
						t.Logf("%s: Gossip %s %s: %s", h.Name, c.Status, c.Reason, c.Message)
						return true
					}
				}
				return false
			})
			eventually(t, "decrypt errors counted by "+h.Name, func() bool {
				return env.metric(t, i, `groundcloud_membership_gossip_errors_total{reason="Decrypt"}`) > 0
			})
			waitLog(t, env.Agent(i).LogPath, "Gossip from another agent cannot be decrypted")
		}
	})

	t.Run("a restarted agent takes back only its own share", func(t *testing.T) {
		i := 0
		self, other := names[i], names[1-i]
		if err := env.Agent(i).Stop(); err != nil {
			t.Logf("stop the agent of %s: %v", self, err)
		}
		restart := time.Now()
		if err := env.StartAgent(t.Context(), i); err != nil {
			t.Fatal(err)
		}
		time.Sleep(holdDown + 8*time.Second)
		for _, v := range vips {
			if want[v] != other {
				continue
			}
			for _, c := range env.holders.Changes(v, restart) {
				if slices.Contains(c.Hosts, self) {
					t.Errorf("restarted %s claimed %s of %s: %v", self, v, other, env.holders.Changes(v, restart))
					break
				}
			}
		}
		if got := env.settle(t, vips, 2*time.Second); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("owners after the restart %v, want %v", got, want)
		}
	})
}

func ownsSome(owners map[netip.Addr]string, hosts []string) bool {
	count := map[string]int{}
	for _, h := range owners {
		count[h]++
	}
	for _, h := range hosts {
		if count[h] == 0 {
			return false
		}
	}
	return true
}

// announcements records gratuitous ARP (sender and target address the
// same) for some addresses, as a host of the lab hears it.
type announcements struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	by     map[netip.Addr]map[string]int // address -> MAC -> frames
}

// watchAnnouncements listens on h's link for gratuitous ARP about vips
// until stop.
func watchAnnouncements(t *testing.T, h *netlab.Host, vips []netip.Addr) *announcements {
	t.Helper()
	fd := -1
	err := h.Do(func() error {
		ifc, err := net.InterfaceByName(h.Iface)
		if err != nil {
			return err
		}
		proto := htons(unix.ETH_P_ARP)
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto)); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatalf("listen for ARP on %s: %v", h.Name, err)
	}
	want := map[netip.Addr]bool{}
	for _, v := range vips {
		want[v] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &announcements{cancel: cancel, done: make(chan struct{}), by: map[netip.Addr]map[string]int{}}
	go func() {
		defer close(a.done)
		defer unix.Close(fd)
		buf := make([]byte, 1600)
		for ctx.Err() == nil {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			if mac, vip, ok := gratuitousARP(buf[:n]); ok && want[vip] {
				a.mu.Lock()
				if a.by[vip] == nil {
					a.by[vip] = map[string]int{}
				}
				a.by[vip][mac]++
				a.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { a.stop() })
	return a
}

// stop ends the watch and returns what it heard.
func (a *announcements) stop() map[netip.Addr]map[string]int {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.by
}

// gratuitousARP reads an Ethernet frame of ARP for IPv4 in which a station
// announces an address: sender and target protocol address the same.
func gratuitousARP(frame []byte) (string, netip.Addr, bool) {
	if len(frame) < 42 || binary.BigEndian.Uint16(frame[12:14]) != unix.ETH_P_ARP {
		return "", netip.Addr{}, false
	}
	arp := frame[14:]
	spa, tpa := netip.AddrFrom4([4]byte(arp[14:18])), netip.AddrFrom4([4]byte(arp[24:28]))
	if spa != tpa {
		return "", netip.Addr{}, false
	}
	return net.HardwareAddr(arp[8:14]).String(), spa, true
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
