package bench

import (
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// ecmpRun is one load through the BGP address while hosts load-balancer
// hosts announce it.
type ecmpRun struct {
	dpRun
	hosts int
	// perHost is what each load-balancer host's link received and sent
	// meanwhile, in the order of bench.lbs.
	perHost []linkCounters
}

// ecmpThroughput loads the BGP address's HTTP port with wrk from the
// client behind the router (keep-alive, and a connection per request),
// announced by both load-balancer hosts and by the first only (the
// second's pool label removed), alternating which comes first from round
// to round; it leaves both announcing.
func (b *bench) ecmpThroughput(t *testing.T, nh *nexthops, vip netip.Addr, cfg dpConfig) []ecmpRun {
	t.Helper()
	tg := dpTarget{path: "bgp", tcp: netip.AddrPortFrom(vip, bgpHTTPPort)}
	tg.url = fmt.Sprintf("http://%s/", tg.tcp)
	checkHTTP(t, b.client, tg.url)
	var runs []ecmpRun
	for r := range cfg.rounds {
		for _, n := range rotate([]int{len(b.lbs), 1}, r) {
			b.announceBy(t, nh, vip, n)
			for _, mode := range []string{modeKeepAlive, modeClose} {
				run := b.measureECMP(t, tg, cfg, mode)
				run.round, run.hosts = r+1, n
				t.Logf("round %d %-9s %d host(s) %9.0f req/s  p50 %-8s p99 %-8s errors %d  packets per host %v  cpu %s",
					run.round, run.mode, n, run.rps, run.p50, run.p99, run.errors, packetsOf(run.perHost), run.cpu.Round(time.Millisecond))
				runs = append(runs, run)
			}
		}
	}
	b.announceBy(t, nh, vip, len(b.lbs))
	return runs
}

// announceBy labels the first n load-balancer hosts for pool "bgp" and
// unlabels the others, and waits until the router forwards vip to those n
// only, for a second.
func (b *bench) announceBy(t *testing.T, nh *nexthops, vip netip.Addr, n int) {
	t.Helper()
	for i, h := range b.lbs {
		b.setHostLabel(t, h.Name, i < n)
	}
	took := nh.waitOnly(t, vip, time.Second, b.lbs[:n]...)
	t.Logf("the router forwards %s to %d host(s) after %s", vip, n, took.Round(time.Millisecond))
}

// measureECMP runs one wrk load and adds what each load-balancer host's
// link carried and the machine's busy time meanwhile.
func (b *bench) measureECMP(t *testing.T, tg dpTarget, cfg dpConfig, mode string) ecmpRun {
	t.Helper()
	before := make([]linkCounters, len(b.lbs))
	for i, h := range b.lbs {
		c, err := countersOf(h)
		must(t, err)
		before[i] = c
	}
	cpu0, err := machineBusy()
	must(t, err)
	run, err := runWrk(t, b.client, tg, cfg, mode, cfg.duration)
	must(t, err)
	cpu1, err := machineBusy()
	must(t, err)
	run.cpu = cpu1 - cpu0
	out := ecmpRun{dpRun: run}
	for i, h := range b.lbs {
		c, err := countersOf(h)
		must(t, err)
		out.perHost = append(out.perHost, linkCounters{bytes: c.bytes - before[i].bytes, packets: c.packets - before[i].packets})
	}
	return out
}

func packetsOf(cs []linkCounters) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.packets)
	}
	return out
}

// checkHTTP waits until url answers a GET with 200 from the client.
func checkHTTP(t *testing.T, client *netlab.Host, url string) {
	t.Helper()
	hc := client.HTTPClient()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s from %s: %v", url, client.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
