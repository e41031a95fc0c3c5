package agent

import (
	"testing"
	"time"
)

// TestReadiness: ready once a sync programmed the data plane; a restarted
// agent whose host advertised routes before waits until it advertises
// over an established session again, or readyWait.
func TestReadiness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r readiness
	if r.ready(t0) == nil {
		t.Error("ready before any sync")
	}
	r.note(false, false)
	if r.ready(t0) == nil {
		t.Error("ready after a failed sync")
	}
	r.note(true, false)
	if err := r.ready(t0); err != nil {
		t.Errorf("not ready after a sync, no BGP to wait for: %v", err)
	}

	var b readiness
	b.expectBGP(t0)
	b.note(true, false)
	if b.ready(t0.Add(time.Second)) == nil {
		t.Error("ready before advertising again")
	}
	if err := b.ready(t0.Add(readyWait)); err != nil {
		t.Errorf("not ready after readyWait: %v", err)
	}
	b.note(true, true)
	if err := b.ready(t0.Add(time.Second)); err != nil {
		t.Errorf("not ready once it advertises again: %v", err)
	}
	b.note(true, false) // a later sync without routes: stays ready
	if err := b.ready(t0.Add(time.Second)); err != nil {
		t.Errorf("not ready after it had advertised: %v", err)
	}
}
