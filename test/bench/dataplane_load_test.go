package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// runWrk runs wrk from the client host against one path and parses its
// report.
func runWrk(t *testing.T, client *netlab.Host, tg dpTarget, cfg dpConfig, mode string, d time.Duration) (dpRun, error) {
	conns, url := cfg.conns, tg.url
	if mode == modeLarge {
		conns, url = cfg.largeConns, tg.url+"?bytes="+strconv.Itoa(dpLargeSize)
	}
	args := []string{"-t", strconv.Itoa(cfg.threads), "-c", strconv.Itoa(conns),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())), "--timeout", "2s", "--latency"}
	if mode == modeClose {
		args = append(args, "-H", "Connection: close")
	}
	args = append(args, url)
	ctx, cancel := context.WithTimeout(t.Context(), d+30*time.Second)
	defer cancel()
	out, err := client.Command(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return dpRun{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	run, err := parseWrk(string(out))
	if err != nil {
		return dpRun{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	run.path, run.mode = tg.path, mode
	return run, nil
}

var (
	wrkPercentile = regexp.MustCompile(`^\s*(50|75|90|99)%\s+([0-9.]+)(us|ms|s|m)\s*$`)
	wrkRequests   = regexp.MustCompile(`^\s*(\d+) requests in `)
	wrkRate       = regexp.MustCompile(`^Requests/sec:\s+([0-9.]+)`)
	wrkSocketErrs = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx     = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// parseWrk reads wrk's report with --latency: requests/s, the latency
// distribution, socket errors and non-2xx answers.
func parseWrk(out string) (dpRun, error) {
	var r dpRun
	var seen int
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		l := s.Text()
		if m := wrkPercentile.FindStringSubmatch(l); m != nil {
			d, err := wrkDuration(m[2], m[3])
			if err != nil {
				return r, err
			}
			switch m[1] {
			case "50":
				r.p50 = d
			case "75":
				r.p75 = d
			case "90":
				r.p90 = d
			case "99":
				r.p99 = d
			}
			seen++
		}
		if m := wrkRequests.FindStringSubmatch(l); m != nil {
			r.requests, _ = strconv.Atoi(m[1])
		}
		if m := wrkRate.FindStringSubmatch(l); m != nil {
			r.rps, _ = strconv.ParseFloat(m[1], 64)
			seen++
		}
		if m := wrkSocketErrs.FindStringSubmatch(l); m != nil {
			for _, n := range m[1:] {
				v, _ := strconv.Atoi(n)
				r.errors += v
			}
		}
		if m := wrkNon2xx.FindStringSubmatch(l); m != nil {
			v, _ := strconv.Atoi(m[1])
			r.errors += v
		}
	}
	if seen != 5 {
		return r, errors.New("no latency distribution or Requests/sec in wrk's output")
	}
	return r, nil
}

// wrkDuration converts wrk's "651.00us", "1.02ms", "1.50s", "2.00m".
func wrkDuration(num, unit string) (time.Duration, error) {
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, err
	}
	scale := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}[unit]
	return time.Duration(v * float64(scale)), nil
}

// runUDP is the UDP load: senders concurrent request/response loops from
// the client host to the target's UDP address, each on its own socket
// (its own source port, so its own flow), one datagram outstanding at a
// time. An answer not back within udpTimeout counts as lost.
func runUDP(ctx context.Context, client *netlab.Host, tg dpTarget, senders int, d time.Duration) (dpRun, error) {
	const udpTimeout = 500 * time.Millisecond
	conns := make([]*net.UDPConn, senders)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	err := client.Do(func() error {
		for i := range conns {
			c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(tg.udp))
			if err != nil {
				return err
			}
			conns[i] = c
		}
		return nil
	})
	if err != nil {
		return dpRun{}, fmt.Errorf("udp load on %s: %w", tg.path, err)
	}
	type result struct {
		lat  []time.Duration
		lost int
		err  error
	}
	results := make([]result, senders)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			res := &results[i]
			res.lat = make([]time.Duration, 0, 1<<16)
			req := make([]byte, 64)
			buf := make([]byte, 2048)
			for ctx.Err() == nil {
				sent := time.Now()
				if !sent.Before(end) {
					return
				}
				if _, err := c.Write(req); err != nil {
					res.err = err
					return
				}
				_ = c.SetReadDeadline(sent.Add(udpTimeout))
				if _, err := c.Read(buf); err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						res.lost++
						continue
					}
					res.err = err
					return
				}
				res.lat = append(res.lat, time.Since(sent))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	run := dpRun{path: tg.path, mode: modeUDP}
	for _, r := range results {
		if r.err != nil {
			return dpRun{}, fmt.Errorf("udp load on %s: %w", tg.path, r.err)
		}
		all = append(all, r.lat...)
		run.errors += r.lost
	}
	if err := ctx.Err(); err != nil {
		return dpRun{}, err
	}
	run.requests = len(all)
	run.rps = float64(len(all)) / elapsed.Seconds()
	run.p50, run.p75, run.p90, run.p99 = percentile(all, 50), percentile(all, 75), percentile(all, 90), percentile(all, 99)
	return run, nil
}

func TestParseWrk(t *testing.T) {
	out := `Running 5s test @ http://192.0.2.200/
  3 threads and 48 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.51ms    1.83ms  40.12ms   85.33%
    Req/Sec     6.61k   659.72     8.07k    70.67%
  Latency Distribution
     50%  651.00us
     75%    2.95ms
     90%    4.59ms
     99%    1.20s
  98765 requests in 5.00s, 14.41MB read
  Socket errors: connect 0, read 3, write 0, timeout 2
  Non-2xx or 3xx responses: 1
Requests/sec:  19753.00
Transfer/sec:      2.88MB
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 19753 || r.requests != 98765 || r.errors != 6 {
		t.Errorf("rps %v requests %d errors %d", r.rps, r.requests, r.errors)
	}
	if r.p50 != 651*time.Microsecond || r.p75 != 2950*time.Microsecond || r.p90 != 4590*time.Microsecond || r.p99 != 1200*time.Millisecond {
		t.Errorf("percentiles %v %v %v %v", r.p50, r.p75, r.p90, r.p99)
	}
	if _, err := parseWrk("unable to connect to 192.0.2.200:80 Connection refused\n"); err == nil {
		t.Error("no error for output without a report")
	}
}
