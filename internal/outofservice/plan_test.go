package outofservice

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
)

var now = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// offFor is a fresh status whose BMC has said Off for d.
func offFor(d time.Duration) bmc.Status {
	return bmc.Status{Answer: bmc.Answer{PowerState: bmc.PowerOff}, AnsweredAt: now.Add(-time.Second),
		OffSince: now.Add(-d), MaxAge: 90 * time.Second}
}

func obs(mods ...func(*Observation)) Observation {
	o := Observation{Mode: config.OutOfServiceTaint, Grace: 30 * time.Second, Status: offFor(time.Minute),
		HasStatus: true, Ready: corev1.ConditionFalse, Now: now}
	for _, m := range mods {
		m(&o)
	}
	return o
}

func withStatus(s bmc.Status) func(*Observation) { return func(o *Observation) { o.Status = s } }
func withReady(r corev1.ConditionStatus) func(*Observation) {
	return func(o *Observation) { o.Ready = r }
}
func ours(o *Observation)     { o.Tainted, o.Marked = true, true }
func humans(o *Observation)   { o.Tainted = true }
func onlyMark(o *Observation) { o.Marked = true }

func TestDecide(t *testing.T) {
	on := bmc.Status{Answer: bmc.Answer{PowerState: bmc.PowerOn}, AnsweredAt: now.Add(-time.Second), MaxAge: 90 * time.Second}
	failed := offFor(time.Minute)
	failed.Err, failed.Reason, failed.OffSince = errors.New("refused"), bmc.ReasonUnreachable, time.Time{}
	stale := offFor(time.Hour)
	stale.AnsweredAt = now.Add(-10 * time.Minute)
	tests := []struct {
		name string
		o    Observation
		want Action
	}{
		{"off for longer than the grace, NotReady: taint", obs(), Apply},
		{"Ready condition Unknown counts as NotReady", obs(withReady(corev1.ConditionUnknown)), Apply},
		{"no Ready condition counts as NotReady", obs(withReady("")), Apply},
		{"off exactly the grace: taint", obs(withStatus(offFor(30 * time.Second))), Apply},
		{"off shorter than the grace: not yet", obs(withStatus(offFor(29 * time.Second))), None},
		{"BMC says On: never", obs(withStatus(on)), None},
		{"BMC says PoweringOff: never", obs(withStatus(bmc.Status{Answer: bmc.Answer{PowerState: "PoweringOff"}, AnsweredAt: now, MaxAge: time.Minute})), None},
		{"BMC unreachable: never", obs(withStatus(failed)), None},
		{"BMC answer stale: never", obs(withStatus(stale)), None},
		{"no BMC status (or for other settings): never", obs(func(o *Observation) { o.HasStatus = false }), None},
		{"Ready Node whose BMC says Off: never", obs(withReady(corev1.ConditionTrue)), None},
		{"taint off for the machine: never", obs(func(o *Observation) { o.Mode = config.OutOfServiceOff }), None},
		{"already tainted by us, still off: kept", obs(ours), None},
		{"tainted by us, BMC On, Ready: removed", obs(ours, withStatus(on), withReady(corev1.ConditionTrue)), Remove},
		{"tainted by us, BMC On, still NotReady: kept", obs(ours, withStatus(on)), None},
		{"tainted by us, Ready, BMC unreachable: kept", obs(ours, withStatus(failed), withReady(corev1.ConditionTrue)), None},
		{"tainted by us, Ready, BMC answer stale On: kept", obs(ours, withStatus(func() bmc.Status { s := on; s.AnsweredAt = now.Add(-time.Hour); return s }()), withReady(corev1.ConditionTrue)), None},
		{"a person's taint, BMC On, Ready: kept", obs(humans, withStatus(on), withReady(corev1.ConditionTrue)), None},
		{"a person's taint, BMC Off: left alone", obs(humans), None},
		{"our mark without the taint, machine back: forgotten", obs(onlyMark, withStatus(on), withReady(corev1.ConditionTrue)), Forget},
		{"our mark without the taint, still off: tainted again", obs(onlyMark), Apply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.o)
			if d.Action != tt.want {
				t.Errorf("Decide = %v (%s), want %v", d.Action, d.Why, tt.want)
			}
			if d.Action != None && d.Why == "" {
				t.Error("an action without its evidence")
			}
		})
	}
}

// TestDecideFence: a machine is powered off only when fencing and the
// taint are on for it, its Node has been NotReady for bmc-fence-after and
// is untainted, its BMC says On in a fresh answer, and it was not fenced
// in the last bmc-fence-after.
func TestDecideFence(t *testing.T) {
	on := bmc.Status{Answer: bmc.Answer{PowerState: bmc.PowerOn}, AnsweredAt: now.Add(-time.Second), MaxAge: 90 * time.Second}
	failed := on
	failed.Err, failed.Reason = errors.New("timeout"), bmc.ReasonTimeout
	stale := on
	stale.AnsweredAt = now.Add(-10 * time.Minute)
	fencing := func(o *Observation) {
		o.Fence, o.FenceAfter, o.NotReadySince, o.Status = config.FencePowerOff, 2*time.Minute, now.Add(-3*time.Minute), on
	}
	tests := []struct {
		name string
		o    Observation
		want Action
	}{
		{"NotReady for longer than fence-after, BMC On: fence", obs(fencing), Fence},
		{"Ready condition Unknown as long: fence", obs(fencing, withReady(corev1.ConditionUnknown)), Fence},
		{"NotReady exactly fence-after: fence", obs(fencing, func(o *Observation) { o.NotReadySince = now.Add(-2 * time.Minute) }), Fence},
		{"NotReady shorter: not yet", obs(fencing, func(o *Observation) { o.NotReadySince = now.Add(-time.Minute) }), None},
		{"no Ready condition (never reported): never", obs(fencing, withReady(""), func(o *Observation) { o.NotReadySince = time.Time{} }), None},
		{"Ready: never", obs(fencing, withReady(corev1.ConditionTrue)), None},
		{"fencing off: never", obs(fencing, func(o *Observation) { o.Fence = config.FenceOff }), None},
		{"taint off for the machine: never", obs(fencing, func(o *Observation) { o.Mode = config.OutOfServiceOff }), None},
		{"BMC unreachable: never", obs(fencing, withStatus(failed)), None},
		{"BMC answer stale: never", obs(fencing, withStatus(stale)), None},
		{"no BMC status: never", obs(fencing, func(o *Observation) { o.HasStatus = false }), None},
		{"BMC says PoweringOff: never", obs(fencing, withStatus(bmc.Status{Answer: bmc.Answer{PowerState: "PoweringOff"}, AnsweredAt: now, MaxAge: time.Minute})), None},
		{"already tainted (a person's or ours): never", obs(fencing, humans), None},
		{"fenced a minute ago, still On: not again yet", obs(fencing, func(o *Observation) { o.LastFenced = now.Add(-time.Minute) }), None},
		{"fenced longer ago, still On: again", obs(fencing, func(o *Observation) { o.LastFenced = now.Add(-2 * time.Minute) }), Fence},
		{"fenced, now Off for the grace: taint", obs(fencing, withStatus(offFor(time.Minute)), func(o *Observation) { o.LastFenced = now.Add(-time.Minute) }), Apply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.o)
			if d.Action != tt.want {
				t.Errorf("Decide = %v (%s), want %v", d.Action, d.Why, tt.want)
			}
			if d.Action == Fence && !strings.Contains(d.Why, "PowerState On") {
				t.Errorf("fence without its evidence: %q", d.Why)
			}
		})
	}
}
