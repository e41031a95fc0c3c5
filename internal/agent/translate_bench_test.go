package agent

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/backends"
	"github.com/groundcloud/groundcloud/internal/health"
)

// BenchmarkTranslate5000x100 is one Translate of 5,000 LoadBalancers (one
// port, externalTrafficPolicy Cluster) over 100 healthy nodes: without the
// memo, and with the memo the agent keeps (the same objects as the sync
// before, as while other Services are created or a node changes).
func BenchmarkTranslate5000x100(b *testing.B) {
	var lbs []*v1alpha1.LoadBalancer
	for i := range 5000 {
		lbs = append(lbs, newLB(fmt.Sprintf("svc-%04d", i), func(lb *v1alpha1.LoadBalancer) {
			lb.Spec.Addresses = []string{netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}).String()}
			lb.Spec.Ports[0].NodePort = int32(20000 + i)
		}))
	}
	var nodes []backends.Backend
	for i := range 100 {
		nodes = append(nodes, backends.Backend{Name: fmt.Sprintf("node-%03d", i), Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}})
	}
	state := func(health.Target) health.State { return health.Healthy }
	b.Run("no-memo", func(b *testing.B) {
		for b.Loop() {
			Translate(lbs, nodes, Host{}, state)
		}
	})
	b.Run("memo", func(b *testing.B) {
		m := &translateMemo{}
		m.translate(lbs, nodes, Host{}, state)
		for b.Loop() {
			m.translate(lbs, nodes, Host{}, state)
		}
	})
}
