package agent

import (
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/dataplane"
)

// Partial syncs write only what the state changes, so a bucket map emptied
// by hand stays empty until a full sync; the agent makes one every
// FullSyncEvery. With FullSyncEvery 0 the edit stays.
func TestFullSyncRepairsHandEdits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		every  time.Duration
		repair bool
	}{
		{"periodic full syncs", 50 * time.Millisecond, true},
		{"none", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nft := knftables.NewFake(knftables.IPv4Family, dataplane.TableName)
			syncer := dataplane.NewSyncer(nft, nil, nil, nil)
			noCheck := func(lb *v1alpha1.LoadBalancer) { lb.Spec.HealthCheck = nil }
			a := testAgent(t, Config{DataPlane: syncer, FullSyncEvery: tc.every, MinSync: 10 * time.Millisecond, MaxSync: 50 * time.Millisecond},
				newLB("web", noCheck))
			runAgent(t, a)
			elements := func() int {
				nft.RLock()
				defer nft.RUnlock()
				n := 0
				if nft.Table == nil {
					return 0
				}
				for _, m := range nft.Table.Maps {
					if len(m.Elements) == dataplane.BucketCount {
						n++
					}
				}
				return n
			}
			waitFor(t, "the bucket map filled", func() bool { return elements() == 1 })
			nft.Lock()
			for _, m := range nft.Table.Maps {
				if len(m.Elements) == dataplane.BucketCount {
					m.Elements = nil // as "nft flush map" by hand
				}
			}
			nft.Unlock()
			if tc.repair {
				waitFor(t, "the bucket map refilled", func() bool { return elements() == 1 })
				return
			}
			// Syncs keep running (MaxSync) and none is full.
			time.Sleep(500 * time.Millisecond)
			if elements() != 0 {
				t.Errorf("the bucket map was refilled without full syncs: the test shows nothing")
			}
		})
	}
}
