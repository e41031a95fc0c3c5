package layer2

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Defaults of a burst: three frames 100 ms apart, as keepalived and MetalLB
// do; one lost frame does not leave a client on the old MAC.
const (
	defaultBurstCount    = 3
	defaultBurstInterval = 100 * time.Millisecond
)

// sender sends whole Ethernet frames out of one link.
type sender interface {
	send(frame []byte) error
	close() error
}

// packetSender is an AF_PACKET socket created in the Manager's namespace.
// Protocol 0: it receives nothing.
type packetSender struct {
	fd      int
	ifindex int
}

func openPacketSender(ns netns.NsHandle, ifindex int) (sender, error) {
	fd := -1
	err := inNamespace(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open packet socket: %w", err)
	}
	return &packetSender{fd: fd, ifindex: ifindex}, nil
}

func (s *packetSender) send(frame []byte) error {
	ethertype := binary.BigEndian.Uint16(frame[12:14])
	to := &unix.SockaddrLinklayer{
		Protocol: ethertype<<8 | ethertype>>8, // network byte order
		Ifindex:  s.ifindex,
		Halen:    6,
	}
	copy(to.Addr[:], frame[:6])
	return unix.Sendto(s.fd, frame, unix.MSG_DONTWAIT, to)
}

func (s *packetSender) close() error { return unix.Close(s.fd) }

// announce starts a burst for addrs on l, off the caller's goroutine. The
// socket is opened here, on the caller's goroutine, so that without
// InNamespace it is in the same namespace as the addresses Set just added.
// Before each frame the burst checks, under m.mu, that the address is still
// held, so no frame leaves after Set or Cleanup let the address go.
func (m *Manager) announce(l link, addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	if l.mac == nil {
		m.logger.V(2).Info("Not announcing virtual IPs: interface has no Ethernet address", "addresses", addrs)
		return
	}
	s, err := m.openSender(m.ns, l.index)
	if err != nil {
		m.logger.Error(err, "Cannot announce virtual IPs", "addresses", addrs)
		return
	}
	m.mu.Lock()
	if m.burstCtx == nil {
		m.burstCtx, m.stopBursts = context.WithCancel(context.Background())
	}
	ctx := m.burstCtx
	m.mu.Unlock()
	m.bursts.Add(1)
	go func() {
		defer m.bursts.Done()
		defer func() { _ = s.close() }()
		m.burst(ctx, s, l, addrs)
	}()
}

func (m *Manager) burst(ctx context.Context, s sender, l link, addrs []netip.Addr) {
	frames := make([][]byte, len(addrs))
	for i, a := range addrs {
		frames[i] = announcement(l.mac, a)
	}
	for round := range m.burstCount {
		if round > 0 {
			t := time.NewTimer(m.burstInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		sent, err := m.sendHeld(s, addrs, frames)
		if err != nil {
			m.logger.Error(err, "Cannot announce virtual IPs", "round", round+1)
		}
		if sent == 0 {
			return // none held any more
		}
	}
	m.logger.V(4).Info("Announced virtual IPs", "addresses", addrs)
}

// sendHeld sends the frame of each address still held and not quiet, and
// reports how many it tried.
func (m *Manager) sendHeld(s sender, addrs []netip.Addr, frames [][]byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	sent := 0
	for i, a := range addrs {
		if !m.held[a] || m.quiet[a] {
			continue
		}
		sent++
		if err := s.send(frames[i]); err != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", a, err))
		}
	}
	return sent, errors.Join(errs...)
}
