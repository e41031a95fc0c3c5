package ipam

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/config"
)

// BenchmarkAssign measures Assign with n Services holding addresses of a
// dual-stack pool (an IPv4 /16 and an IPv6 /64) with gaps every tenth
// address: "new" assigns a new Service and releases it again; "re-ensure"
// assigns an existing Service its unchanged request, as on every start of
// the controller manager.
func BenchmarkAssign(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		a, reqs := benchAllocator(b, n)
		b.Run(fmt.Sprintf("services=%d/new", n), func(b *testing.B) {
			req := mustRequest(b, newService("new", withFamilies(prefer, v4, v6), withPorts("TCP/443")))
			for b.Loop() {
				if _, err := a.Assign(req); err != nil {
					b.Fatal(err)
				}
				a.Release(req.Key)
			}
		})
		b.Run(fmt.Sprintf("services=%d/re-ensure", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := a.Assign(reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkRestore measures rebuilding an Allocator from n records, as
// after a restart.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		a, reqs := benchAllocator(b, n)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			for b.Loop() {
				r := New(benchPools())
				for _, req := range reqs {
					rec := a.records[req.Key]
					if err := r.Restore(req.Key, rec.alloc, Terms{SharingKey: rec.sharingKey, Ports: rec.ports}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func benchPools() []*config.Pool {
	return []*config.Pool{newPool("public", ranges("10.0.0.0/16", "2001:db8::/64"))}
}

func benchAllocator(b *testing.B, n int) (*Allocator, []Request) {
	b.Helper()
	a := New(benchPools())
	var reqs []Request
	for i := range n + n/9 {
		mods := []func(*v1.Service){withFamilies(prefer, v4, v6), withPorts("TCP/80", "TCP/443")}
		if i%7 == 0 {
			mods = append(mods, withSharing(fmt.Sprintf("k%d", i%70)), withPorts(fmt.Sprintf("UDP/%d", 1000+i)))
		}
		req := mustRequest(b, newService(fmt.Sprintf("svc-%d", i), mods...))
		if _, err := a.Assign(req); err != nil {
			b.Fatal(err)
		}
		reqs = append(reqs, req)
	}
	kept := reqs[:0]
	for i, req := range reqs {
		if i%10 == 5 {
			a.Release(req.Key)
			continue
		}
		kept = append(kept, req)
	}
	return a, kept
}
