package membership

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	members = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "membership",
		Name:           "members",
		Help:           "Agents this host sees in gossip, itself included, by state (Starting, Unhealthy, HoldDown, Ready).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	splitBrains = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "membership",
		Name:           "split_brains_total",
		Help:           "Virtual IPs found answered by another host too, by what this host did (Defend: kept and announced it, Yield: withdrew it).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action"})
	conflictsNow = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "membership",
		Name:           "split_brains",
		Help:           "Virtual IPs this host owns that another host answers for now.",
		StabilityLevel: metrics.ALPHA,
	})
	addressesInUse = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "groundcloud",
		Subsystem:      "membership",
		Name:           "addresses_in_use",
		Help:           "Virtual IPs this host owns that a station which is no load-balancer host claims on the link: not announced when the claim came before this host first held them, defended when after.",
		StabilityLevel: metrics.ALPHA,
	})
	gossipErrorCount = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "groundcloud",
		Subsystem:      "membership",
		Name:           "gossip_errors_total",
		Help:           "Gossip failures, by reason (Decrypt: a message from another host could not be decrypted, its key differs; Join: joining a known address failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	registerOnce sync.Once
)

// RegisterMetrics registers this package's metrics, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(members, splitBrains, conflictsNow, addressesInUse, gossipErrorCount)
		// Every series from 0, so that increase() in alerts sees the first.
		for _, a := range []Action{ActionDefend, ActionYield} {
			splitBrains.WithLabelValues(string(a))
		}
		for _, kind := range []string{GossipErrorDecrypt, GossipErrorJoin} {
			gossipErrorCount.WithLabelValues(kind)
		}
	})
}

func recordConflict(c Conflict) {
	if c.Action != ActionNone {
		splitBrains.WithLabelValues(string(c.Action)).Inc()
	}
}

func recordGossipError(kind string) { gossipErrorCount.WithLabelValues(kind).Inc() }

func setConflicts(n int) { conflictsNow.Set(float64(n)) }

func setInUse(n int) { addressesInUse.Set(float64(n)) }

func (g *Gossip) recordMetrics() {
	g.mu.Lock()
	count := map[State]int{g.state(): 1}
	for _, p := range g.peers {
		count[p.State]++
	}
	g.mu.Unlock()
	for _, s := range []State{StateStarting, StateUnhealthy, StateHoldDown, StateReady, StateLeaving, StateDraining} {
		members.WithLabelValues(string(s)).Set(float64(count[s]))
	}
}
