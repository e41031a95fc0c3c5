package availability

import (
	"slices"
	"time"
)

// Attempt is one new connection: connected and greeted by a node within
// the timeout (Err nil), or not.
type Attempt struct {
	Start time.Time
	Took  time.Duration
	// Node is the node that greeted it.
	Node string
	Err  error
}

// Outage is what new connections saw around a fault.
type Outage struct {
	// Attempts in the window, and how many failed.
	Attempts, Failed int
	// Gap is the longest time from the start of a failed attempt to the
	// start of the next successful one: how long new connections did not
	// work (0 when none failed).
	Gap time.Duration
	// Recovered is from the fault to the start of the first successful
	// attempt after the last failure (0 when none failed).
	Recovered time.Duration
	// Unrecovered: the window ended with attempts failing.
	Unrecovered bool
}

// Measure computes the Outage of the attempts started in [from, until)
// around a fault at fault (from is a little before it, so that attempts in
// flight when it struck count).
func Measure(attempts []Attempt, fault, from, until time.Time) Outage {
	var in []Attempt
	for _, a := range attempts {
		if !a.Start.Before(from) && a.Start.Before(until) {
			in = append(in, a)
		}
	}
	slices.SortFunc(in, func(a, b Attempt) int { return a.Start.Compare(b.Start) })
	var o Outage
	o.Attempts = len(in)
	var runStart time.Time
	var lastFailure bool
	for _, a := range in {
		if a.Err != nil {
			o.Failed++
			if runStart.IsZero() {
				runStart = a.Start
			}
			lastFailure = true
			continue
		}
		if !runStart.IsZero() {
			o.Gap = max(o.Gap, a.Start.Sub(runStart))
			o.Recovered = max(a.Start.Sub(fault), 0)
			runStart = time.Time{}
		}
		lastFailure = false
	}
	if lastFailure {
		o.Unrecovered = true
		o.Gap = max(o.Gap, until.Sub(runStart))
		o.Recovered = until.Sub(fault)
	}
	return o
}
