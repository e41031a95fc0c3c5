package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/knftables"
)

// NewNFTables returns the knftables.Interface for our table in family (ip or
// ip6). It runs `nft` once to check that it works.
func NewNFTables(family knftables.Family) (knftables.Interface, error) {
	nft, err := knftables.New(family, TableName)
	if err != nil {
		return nil, fmt.Errorf("nftables %s: %w", family, err)
	}
	return nft, nil
}

// Syncer applies States to the kernel: one nftables transaction per family
// per Sync, a full one first and after any error, otherwise only the
// difference from what it applied last. It is the package's only code that
// talks to the kernel; deciding when to sync (rate limits, periodic full
// syncs via ForceFullSync) is the caller's.
type Syncer struct {
	nft       map[knftables.Family]knftables.Interface
	conntrack Conntrack
	memo      *assignMemo // guarded by mu

	mu       sync.Mutex
	needFull bool
	applied  Ruleset
	// unflushed are stale UDP flows whose conntrack deletion failed; retried.
	unflushed map[Flow]bool
	batch     bool     // see BatchBucketElements
	counting  Counting // see CountTraffic
}

// BatchBucketElements makes the Syncer write all the elements of a new or
// refilled bucket map in one command (see bucketsElement): on real nft a
// full sync takes a quarter of the time. Without it each element is its own
// command, which is what knftables' Fake (unit tests) can apply. Call it
// before the first Sync.
func (s *Syncer) BatchBucketElements() *Syncer {
	s.batch = true
	return s
}

// NewSyncer returns a Syncer over an Interface per family (as NewNFTables
// makes them; ipv4 or ipv6 may be nil on a single-stack host, and then VIPs
// of that family are not programmed; netdev may be nil, and then
// passthrough services are not forwarded) and a Conntrack (nil: entries are
// never deleted). It does no I/O.
func NewSyncer(ipv4, ipv6, netdev knftables.Interface, ct Conntrack) *Syncer {
	s := &Syncer{nft: map[knftables.Family]knftables.Interface{}, conntrack: ct, memo: newAssignMemo(), needFull: true, unflushed: map[Flow]bool{}}
	if ipv4 != nil {
		s.nft[knftables.IPv4Family] = ipv4
	}
	if ipv6 != nil {
		s.nft[knftables.IPv6Family] = ipv6
	}
	if netdev != nil {
		s.nft[knftables.NetDevFamily] = netdev
	}
	return s
}

// ForceFullSync makes the next Sync a full one.
func (s *Syncer) ForceFullSync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needFull = true
}

// Result is what a Sync did beside programming the tables.
type Result struct {
	// CleanupErr says that deleting the conntrack entries of stale UDP
	// flows failed. It is not a failure of the Sync: the tables forward
	// the State whatever the conntrack table holds. The Syncer keeps the
	// flows and retries them on each later Sync until that succeeds (or
	// they are in use again).
	CleanupErr error
}

// Sync makes the kernel forward st. Parts of st that Validate rejects are
// skipped (and logged), never failing the rest. It returns an error only
// when a table could not be programmed; after one the next Sync is a full
// one.
func (s *Syncer) Sync(ctx context.Context, st State) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	logger := klog.FromContext(ctx)
	services, problems := normalize(st)
	if len(problems) > 0 {
		logger.V(2).Info("Skipping invalid parts of the load-balancer state", "err", errors.Join(problems...))
	}
	desired := desired(services, s.memo, s.counting)
	desired.addHandOver(st.HandOver)
	full := s.needFull
	start := time.Now()

	var errs []error
	var stale []Flow
	for _, family := range families {
		nft := s.nft[family]
		if nft == nil {
			continue
		}
		want := desired.Table(family)
		ops, err := s.syncFamily(ctx, nft, want, full)
		if err != nil {
			errs = append(errs, fmt.Errorf("sync %s table: %w", family, err))
			continue
		}
		if old := s.applied.Table(family); old != nil {
			stale = append(stale, StaleUDPFlows(old, want)...)
		}
		s.setApplied(family, want)
		logger.V(4).Info("Synced nftables", "family", family, "full", full, "operations", ops)
	}
	res := Result{CleanupErr: s.flushConntrack(ctx, desired, stale)}
	s.needFull = len(errs) > 0
	logger.V(2).Info("Synced data plane", "full", full, "elapsed", time.Since(start), "failed", len(errs) > 0, "cleanupFailed", res.CleanupErr != nil)
	return res, errors.Join(errs...)
}

// syncFamily runs one transaction and returns its number of operations.
func (s *Syncer) syncFamily(ctx context.Context, nft knftables.Interface, want *Table, full bool) (int, error) {
	tx := nft.NewTransaction()
	if old := s.applied.Table(want.Family); full || old == nil {
		existing, err := nft.ListAll(ctx)
		if err != nil && !knftables.IsNotFound(err) {
			return 0, fmt.Errorf("list table: %w", err)
		}
		FullSync(tx, want, existing, s.batch)
	} else {
		PartialSync(tx, old, want, s.batch)
	}
	if tx.NumOperations() == 0 {
		return 0, nil
	}
	if err := nft.Run(ctx, tx); err != nil {
		return 0, fmt.Errorf("run transaction: %w", err)
	}
	return tx.NumOperations(), nil
}

// families are the families of our tables, in the order they are synced.
var families = []knftables.Family{knftables.IPv4Family, knftables.IPv6Family, knftables.NetDevFamily}

func (s *Syncer) setApplied(f knftables.Family, t *Table) {
	switch f {
	case knftables.IPv6Family:
		s.applied.IPv6 = t
	case knftables.NetDevFamily:
		s.applied.NetDev = t
	default:
		s.applied.IPv4 = t
	}
}

// flushConntrack deletes the entries of stale UDP flows, and retries those
// that failed before unless they are in use again.
func (s *Syncer) flushConntrack(ctx context.Context, desired Ruleset, stale []Flow) error {
	for _, f := range stale {
		s.unflushed[f] = true
	}
	var flows []Flow
	for f := range s.unflushed {
		if t := desired.Table(f.family()); t != nil && t.UDPFlows[f] {
			delete(s.unflushed, f)
			continue
		}
		flows = append(flows, f)
	}
	if len(flows) == 0 || s.conntrack == nil {
		clear(s.unflushed)
		return nil
	}
	slices.SortFunc(flows, compareFlows)
	if err := s.conntrack.DeleteUDPFlows(ctx, flows); err != nil {
		return fmt.Errorf("delete conntrack entries of %d stale UDP flows: %w", len(flows), err)
	}
	clear(s.unflushed)
	return nil
}

// Cleanup deletes our tables (and nothing else) and makes the next Sync a
// full one.
func (s *Syncer) Cleanup(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needFull = true
	s.applied = Ruleset{}
	var errs []error
	for _, family := range families {
		nft := s.nft[family]
		if nft == nil {
			continue
		}
		tx := nft.NewTransaction()
		tx.Add(&knftables.Table{}) // so that the delete succeeds when there is no table
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil {
			errs = append(errs, fmt.Errorf("delete %s table: %w", family, err))
		}
	}
	return errors.Join(errs...)
}
