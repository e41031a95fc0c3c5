package layer2

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"k8s.io/klog/v2/ktesting"
)

// fakeSender records the announced address of every frame.
type fakeSender struct {
	mu     sync.Mutex
	sent   []netip.Addr
	closed bool
}

func (s *fakeSender) send(frame []byte) error {
	var a netip.Addr
	if frame[12] == 0x08 { // ARP: sender protocol address
		a = netip.AddrFrom4([4]byte(frame[28:32]))
	} else { // NA: target address
		a = netip.AddrFrom16([16]byte(frame[62:78]))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, a)
	return nil
}

func (s *fakeSender) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *fakeSender) count(a netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.sent {
		if x == a {
			n++
		}
	}
	return n
}

func newTestManager(t *testing.T, interval time.Duration) (*Manager, *fakeSender) {
	logger, _ := ktesting.NewTestContext(t)
	m := NewManager("eth0", logger)
	s := &fakeSender{}
	m.openSender = func(netns.NsHandle, int) (sender, error) { return s, nil }
	m.burstInterval = interval
	return m, s
}

// startBurst holds addrs and starts a burst of them, and returns once the
// first frame of first is out (or 5 s have passed).
func startBurst(m *Manager, s *fakeSender, first netip.Addr, addrs ...netip.Addr) {
	m.setHeld(addrs)
	m.announce(link{index: 2, mac: testMAC}, addrs)
	deadline := time.Now().Add(5 * time.Second)
	for s.count(first) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func TestBurstSendsThreeFramesPerAddress(t *testing.T) {
	m, s := newTestManager(t, time.Millisecond)
	v4, v6 := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8:1::100")
	m.setHeld([]netip.Addr{v4, v6})
	m.announce(link{index: 2, mac: testMAC}, []netip.Addr{v4, v6})
	m.bursts.Wait()
	if s.count(v4) != 3 || s.count(v6) != 3 {
		t.Errorf("frames sent: %s %d, %s %d; want 3 each", v4, s.count(v4), v6, s.count(v6))
	}
	if !s.closed {
		t.Error("socket not closed after the burst")
	}
}

func TestBurstStopsForAddressesLetGo(t *testing.T) {
	m, s := newTestManager(t, 200*time.Millisecond)
	kept, dropped := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.101")
	startBurst(m, s, dropped, kept, dropped)
	m.setHeld([]netip.Addr{kept}) // what Set does before removing an address
	m.bursts.Wait()
	if got := s.count(dropped); got != 1 {
		t.Errorf("%s announced %d times, want 1 (none after it was let go)", dropped, got)
	}
	if got := s.count(kept); got != 3 {
		t.Errorf("%s announced %d times, want 3", kept, got)
	}
}

// An address handed over (Quiet) stays held but gets no more frames, from
// the next frame of a burst in flight on; Quiet without it ends that.
func TestBurstSkipsQuietAddresses(t *testing.T) {
	m, s := newTestManager(t, 200*time.Millisecond)
	loud, quiet := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8:1::101")
	startBurst(m, s, quiet, loud, quiet)
	m.Quiet([]netip.Addr{quiet})
	m.bursts.Wait()
	if got := s.count(quiet); got != 1 {
		t.Errorf("%s announced %d times, want 1 (none once quiet)", quiet, got)
	}
	if got := s.count(loud); got != 3 {
		t.Errorf("%s announced %d times, want 3", loud, got)
	}
	if !m.held[quiet] {
		t.Errorf("%s no longer held once quiet", quiet)
	}

	m.Quiet(nil)
	m.announce(link{index: 2, mac: testMAC}, []netip.Addr{quiet})
	m.bursts.Wait()
	if got := s.count(quiet); got != 4 {
		t.Errorf("%s announced %d times in all, want 4 (a whole burst once no longer quiet)", quiet, got)
	}
}

func TestBurstNeedsEthernet(t *testing.T) {
	m, s := newTestManager(t, time.Millisecond)
	a := netip.MustParseAddr("192.0.2.100")
	m.setHeld([]netip.Addr{a})
	m.announce(link{index: 2}, []netip.Addr{a})
	m.bursts.Wait()
	if s.count(a) != 0 {
		t.Errorf("announced on a link without an Ethernet address")
	}
}
