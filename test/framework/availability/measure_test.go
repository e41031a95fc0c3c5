package availability

import (
	"errors"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	fail := errors.New("timeout")
	// One attempt every 20 ms from 0 to 2000 ms; those starting in
	// [lo, hi) fail.
	run := func(lo, hi int) []Attempt {
		var out []Attempt
		for m := 0; m < 2000; m += 20 {
			a := Attempt{Start: ms(m), Node: "node-1"}
			if m >= lo && m < hi {
				a.Err = fail
			}
			out = append(out, a)
		}
		return out
	}
	tests := []struct {
		name     string
		attempts []Attempt
		want     Outage
	}{
		{"none failed", run(0, 0), Outage{Attempts: 96}},
		{"one outage", run(500, 1300), Outage{Attempts: 96, Failed: 40, Gap: 800 * time.Millisecond, Recovered: 900 * time.Millisecond}},
		{"two outages: the longest counts, recovery after the last", func() []Attempt {
			a := run(500, 600)
			for i := range a {
				if m := a[i].Start.Sub(t0).Milliseconds(); m >= 1000 && m < 1300 {
					a[i].Err = fail
				}
			}
			return a
		}(), Outage{Attempts: 96, Failed: 20, Gap: 300 * time.Millisecond, Recovered: 900 * time.Millisecond}},
		{"never recovered", run(1500, 2000), Outage{Attempts: 96, Failed: 25, Gap: 500 * time.Millisecond, Recovered: 1600 * time.Millisecond, Unrecovered: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fault at 400 ms; the window starts at 80 ms and ends at 2000.
			if got := Measure(tt.attempts, ms(400), ms(80), ms(2000)); got != tt.want {
				t.Errorf("Measure = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMoves(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	changes := []Change{
		{At: at(0), Hosts: []string{"lb-1"}},
		{At: at(1), Hosts: nil},
		{At: at(2), Hosts: []string{"lb-2"}},
		{At: at(3), Hosts: []string{"lb-1", "lb-2"}},
		{At: at(4), Hosts: []string{"lb-1"}},
	}
	if got := Moves(changes); got != 2 {
		t.Errorf("Moves = %d, want 2 (to lb-2, back to lb-1)", got)
	}
	if got := Moves(changes[:1]); got != 0 {
		t.Errorf("Moves of one state = %d", got)
	}
}
