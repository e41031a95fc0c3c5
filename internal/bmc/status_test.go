package bmc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/internal/config"
)

func TestPoweredOff(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	off := Answer{PowerState: PowerOff}
	tests := []struct {
		name string
		s    Status
		want bool
	}{
		{"fresh off", Status{Answer: off, AnsweredAt: now.Add(-time.Minute), MaxAge: 90 * time.Second}, true},
		{"off at the very bound", Status{Answer: off, AnsweredAt: now.Add(-90 * time.Second), MaxAge: 90 * time.Second}, true},
		{"off, too old", Status{Answer: off, AnsweredAt: now.Add(-91 * time.Second), MaxAge: 90 * time.Second}, false},
		{"off, then a failed poll", Status{Answer: off, AnsweredAt: now.Add(-time.Second), Err: errors.New("timeout"), Reason: ReasonTimeout, MaxAge: time.Minute}, false},
		{"on", Status{Answer: Answer{PowerState: "On"}, AnsweredAt: now, MaxAge: time.Minute}, false},
		{"powering off is not off yet", Status{Answer: Answer{PowerState: "PoweringOff"}, AnsweredAt: now, MaxAge: time.Minute}, false},
		{"never answered", Status{Err: errors.New("refused"), MaxAge: time.Minute}, false},
		{"zero", Status{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.PoweredOff(now); got != tt.want {
				t.Errorf("PoweredOff = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestOffSince: OffSince is the first of an unbroken run of Off answers;
// any other answer or a failed poll ends the run.
func TestOffSince(t *testing.T) {
	RegisterMetrics()
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	now := t0
	p := NewPoller(nil, nil)
	p.now = func() time.Time { return now }
	w := &worker{bmc: config.BMC{URL: "https://m", PollInterval: 10 * time.Second}}
	p.workers["m"] = w
	off, on := Answer{PowerState: PowerOff}, Answer{PowerState: "On"}
	steps := []struct {
		a    Answer
		err  error
		want time.Time // OffSince after the poll
	}{
		{off, nil, t0},
		{off, nil, t0},
		{on, nil, time.Time{}},
		{off, nil, t0.Add(3 * time.Second)},
		{off, nil, t0.Add(3 * time.Second)},
		{Answer{}, errors.New("refused"), time.Time{}},
		{off, nil, t0.Add(6 * time.Second)},
	}
	for i, st := range steps {
		now = t0.Add(time.Duration(i) * time.Second)
		p.record(context.Background(), "m", w, st.a, st.err, now)
		s, _ := p.Status("m")
		if !s.OffSince.Equal(st.want) {
			t.Errorf("poll %d: OffSince %v, want %v", i, s.OffSince, st.want)
		}
	}
	s, _ := p.Status("m")
	if got := s.OffFor(t0.Add(16 * time.Second)); got != 10*time.Second {
		t.Errorf("OffFor = %v, want 10s", got)
	}
	if got := s.OffFor(t0.Add(time.Hour)); got != 0 {
		t.Errorf("OffFor of a stale answer = %v, want 0", got)
	}
}
