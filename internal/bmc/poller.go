package bmc

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/config"
)

// Querier asks one BMC for its system's state; Redfish is the real one.
type Querier interface {
	Query(ctx context.Context, b *config.BMC) (Answer, error)
}

// SyncInterval is how often the poller follows changes of the
// cloud-config (machines with a BMC added, changed or removed).
const SyncInterval = time.Second

// Poller polls the BMC of every machine that has one, each at its own
// interval, and keeps the answers.
type Poller struct {
	current func() *config.Config
	query   Querier
	now     func() time.Time

	mu      sync.Mutex
	status  map[string]Status  // by machine name
	workers map[string]*worker // by machine name
	wg      sync.WaitGroup
}

// worker is the poll loop of one machine's BMC.
type worker struct {
	bmc    config.BMC
	cancel context.CancelFunc
}

// NewPoller returns a poller of the BMCs of current()'s machines. It does
// nothing until Run.
func NewPoller(current func() *config.Config, q Querier) *Poller {
	return &Poller{current: current, query: q, now: time.Now, status: map[string]Status{}, workers: map[string]*worker{}}
}

// Status returns what is known of the machine's BMC; false when the
// machine has no BMC or it has not been polled yet. It never waits for a
// BMC.
func (p *Poller) Status(machine string) (Status, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.status[machine]
	return s, ok
}

// Run polls until ctx is done, following the cloud-config, and returns
// once every poll loop has stopped.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTicker(SyncInterval)
	defer t.Stop()
	for {
		p.sync(ctx)
		select {
		case <-ctx.Done():
			p.wg.Wait()
			return
		case <-t.C:
		}
	}
}

// sync starts a poll loop for each machine with a BMC, and stops the
// loops of machines whose BMC is gone or changed (a changed BMC's old
// answer is dropped: it came from another BMC or with other settings).
func (p *Poller) sync(ctx context.Context) {
	want := map[string]config.BMC{}
	for name, m := range p.current().Machines {
		if m.BMC != nil {
			want[name] = *m.BMC
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, w := range p.workers {
		if b, ok := want[name]; !ok || b != w.bmc {
			w.cancel()
			delete(p.workers, name)
			delete(p.status, name)
			forgetMetrics(name)
		}
	}
	if ctx.Err() != nil {
		return
	}
	for name, b := range want {
		if _, ok := p.workers[name]; ok {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &worker{bmc: b, cancel: cancel}
		p.workers[name] = w
		startMetrics(name)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.loop(klog.NewContext(wctx, klog.FromContext(ctx).WithValues("machine", name, "bmc", b.URL)), name, w)
		}()
	}
}

func (p *Poller) loop(ctx context.Context, name string, w *worker) {
	for {
		p.pollOnce(ctx, name, w)
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.bmc.PollInterval):
		}
	}
}

func (p *Poller) pollOnce(ctx context.Context, name string, w *worker) {
	qctx, cancel := context.WithTimeout(ctx, w.bmc.Timeout)
	start := p.now()
	a, err := p.query.Query(qctx, &w.bmc)
	cancel()
	if ctx.Err() != nil {
		return // stopped: the answer is not this worker's to keep
	}
	p.record(ctx, name, w, a, err, start)
}

// record keeps a poll's outcome, if w is still the machine's worker.
func (p *Poller) record(ctx context.Context, name string, w *worker, a Answer, err error, start time.Time) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers[name] != w {
		return
	}
	old, seen := p.status[name]
	s := old
	s.BMC, s.PolledAt, s.MaxAge = w.bmc, now, FreshFor(w.bmc.PollInterval)
	s.Err, s.Reason = err, ""
	pollDuration.WithLabelValues(name).Set(now.Sub(start).Seconds())
	if err != nil {
		s.Reason, s.OffSince = Reason(err), time.Time{}
		pollErrors.WithLabelValues(name, s.Reason).Inc()
		up.WithLabelValues(name).Set(0)
		powerState.DeletePartialMatch(map[string]string{"machine": name})
		if !seen || old.Reason != s.Reason {
			klog.FromContext(ctx).Info("BMC poll failed; its power state is unknown", "reason", s.Reason, "err", err)
		}
	} else {
		s.Answer, s.AnsweredAt = a, now
		switch {
		case a.PowerState != PowerOff:
			s.OffSince = time.Time{}
		case s.OffSince.IsZero():
			s.OffSince = now // the first Off after an error or another state
		}
		up.WithLabelValues(name).Set(1)
		lastAnswer.WithLabelValues(name).Set(float64(now.Unix()))
		if old.Answer.PowerState != a.PowerState {
			powerState.DeletePartialMatch(map[string]string{"machine": name})
		}
		powerState.WithLabelValues(name, a.PowerState).Set(1)
		if !seen || old.Err != nil || old.Answer.PowerState != a.PowerState {
			klog.FromContext(ctx).Info("BMC answered", "powerState", a.PowerState, "model", a.Model, "serialNumber", a.SerialNumber)
		}
	}
	p.status[name] = s
}
