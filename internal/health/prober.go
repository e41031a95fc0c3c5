package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// Prober probes one target; nil means healthy. The Checker bounds each call
// with the configured timeout through ctx.
type Prober interface {
	Probe(ctx context.Context, t Target) error
}

// StatusError is a probe answered with a status other than 200.
type StatusError struct{ Code int }

func (e *StatusError) Error() string { return fmt.Sprintf("health check answered %d", e.Code) }

// errInvalidTarget is returned for targets with no address or a port out of range.
var errInvalidTarget = errors.New("invalid health check target")

// HTTPProber probes with HTTP GET; healthy on 200. Each probe opens a new
// connection (keep-alives off), so a node that died is seen as dead rather
// than through a connection that outlived it. Proxies from the environment
// are ignored and redirects are not followed.
type HTTPProber struct{ client *http.Client }

// NewHTTPProber returns a prober; it opens nothing until Probe.
func NewHTTPProber() *HTTPProber {
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{}).DialContext,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 16 << 10,
	}
	return &HTTPProber{client: &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Probe fetches t.URL() once, or for a TCP target opens a connection and
// closes it.
func (p *HTTPProber) Probe(ctx context.Context, t Target) error {
	if !t.valid() {
		return fmt.Errorf("%w: %s", errInvalidTarget, t)
	}
	if t.TCP {
		return probeTCP(ctx, t)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL(), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidTarget, err)
	}
	req.Header.Set("User-Agent", "groundcloud-agent/health")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close() // keep-alives are off: nothing to drain for
	if resp.StatusCode != http.StatusOK {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// probeTCP is healthy when the port accepts a connection.
func probeTCP(ctx context.Context, t Target) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.Addr.String(), strconv.Itoa(int(t.Port))))
	if err != nil {
		return err
	}
	return conn.Close()
}

// Probe results, the values of the metric's "result" label.
const (
	resultSuccess   = "success"
	resultBadStatus = "bad_status"
	resultTimeout   = "timeout"
	resultError     = "error" // refused, reset, unreachable, invalid target
)

func resultOf(err error) string {
	var statusErr *StatusError
	var netErr net.Error
	switch {
	case err == nil:
		return resultSuccess
	case errors.As(err, &statusErr):
		return resultBadStatus
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return resultTimeout
	default:
		return resultError
	}
}
