package netlab

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
)

// DialTCP connects to addr from the host's namespace. The connection stays
// in the namespace however it is used afterwards.
func (h *Host) DialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	var conn net.Conn
	// A literal address makes the dialer create the socket on the calling
	// goroutine, which Do has locked to a thread inside the namespace.
	err := h.Do(func() error {
		var err error
		conn, err = new(net.Dialer).DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial tcp %s from %s: %w", addr, h.Name, err)
	}
	return conn, nil
}

// UDPExchange sends payload to addr from the host's namespace and returns
// the first datagram that comes back from addr (the socket is connected, so
// an ICMP port-unreachable fails it at once). It waits until ctx is done.
func (h *Host) UDPExchange(ctx context.Context, addr netip.AddrPort, payload []byte) ([]byte, error) {
	var conn *net.UDPConn
	err := h.Do(func() error {
		var err error
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("udp exchange with %s from %s: %w", addr, h.Name, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	buf := make([]byte, 64<<10)
	_, err = conn.Write(payload)
	var n int
	if err == nil {
		n, err = conn.Read(buf)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("udp exchange with %s from %s: %w", addr, h.Name, err)
	}
	return buf[:n], nil
}

// HTTPClient returns a client whose connections are dialled from the
// host's namespace, one per request (no keep-alive), with no proxy. URLs
// must hold literal addresses: nothing resolves names inside a lab.
func (h *Host) HTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, fmt.Errorf("lab http client: %w", err)
			}
			return h.DialTCP(ctx, ap)
		},
		DisableKeepAlives: true,
	}}
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
