package health

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Target is one health endpoint of one node: HTTP (a GET of Path), or
// with TCP a port that must accept a connection. It is a map key: two
// targets are the same when all fields are equal.
type Target struct {
	Addr netip.Addr
	Port int32
	Path string // HTTP only
	TCP  bool
}

// String is "addr:port/path", or "tcp:addr:port", for logs.
func (t Target) String() string {
	hostPort := net.JoinHostPort(t.Addr.String(), strconv.Itoa(int(t.Port)))
	if t.TCP {
		return "tcp:" + hostPort
	}
	return hostPort + t.path()
}

// URL is what a probe fetches: http://addr:port/path.
func (t Target) URL() string {
	host := net.JoinHostPort(t.Addr.String(), strconv.Itoa(int(t.Port)))
	return "http://" + strings.Replace(host, "%", "%25", 1) + t.path() // zone of a link-local address
}

func (t Target) valid() bool { return t.Addr.IsValid() && t.Port > 0 && t.Port <= 65535 }

func (t Target) path() string {
	if strings.HasPrefix(t.Path, "/") {
		return t.Path
	}
	return "/" + t.Path
}
