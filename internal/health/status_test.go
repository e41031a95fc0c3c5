package health

import "testing"

func TestStatusObserve(t *testing.T) {
	const ok, fail = true, false
	tests := []struct {
		name           string
		failure        int
		success        int
		results        []bool
		wantChanged    []bool
		wantStateAtEnd State
	}{
		{
			name: "starts unknown", failure: 2, success: 1,
			results: nil, wantChanged: nil, wantStateAtEnd: Unknown,
		},
		{
			name: "a first failure decides at once", failure: 2, success: 1,
			results:     []bool{fail},
			wantChanged: []bool{true}, wantStateAtEnd: Unhealthy,
		},
		{
			name: "a first success decides at once", failure: 2, success: 2,
			results:     []bool{ok},
			wantChanged: []bool{true}, wantStateAtEnd: Healthy,
		},
		{
			name: "once healthy, one failure is not enough", failure: 2, success: 1,
			results:     []bool{ok, fail},
			wantChanged: []bool{true, false}, wantStateAtEnd: Healthy,
		},
		{
			name: "down after two consecutive failures", failure: 2, success: 1,
			results:     []bool{ok, fail, fail},
			wantChanged: []bool{true, false, true}, wantStateAtEnd: Unhealthy,
		},
		{
			name: "a success resets the failure streak", failure: 2, success: 1,
			results:     []bool{ok, fail, ok, fail, ok},
			wantChanged: []bool{true, false, false, false, false}, wantStateAtEnd: Healthy,
		},
		{
			name: "up after one success", failure: 2, success: 1,
			results:     []bool{ok, fail, fail, ok},
			wantChanged: []bool{true, false, true, true}, wantStateAtEnd: Healthy,
		},
		{
			name: "up after two successes", failure: 2, success: 2,
			results:     []bool{fail, ok, fail, ok, ok},
			wantChanged: []bool{true, false, false, false, true}, wantStateAtEnd: Healthy,
		},
		{
			name: "further failures while down change nothing", failure: 1, success: 1,
			results:     []bool{fail, fail, fail},
			wantChanged: []bool{true, false, false}, wantStateAtEnd: Unhealthy,
		},
		{
			name: "thresholds below one count as one", failure: 0, success: -1,
			results:     []bool{ok, fail, ok},
			wantChanged: []bool{true, true, true}, wantStateAtEnd: Healthy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStatus(tt.failure, tt.success)
			for i, r := range tt.results {
				if got := s.Observe(r); got != tt.wantChanged[i] {
					t.Errorf("Observe #%d (%v) changed = %v, want %v", i+1, r, got, tt.wantChanged[i])
				}
			}
			if got := s.State(); got != tt.wantStateAtEnd {
				t.Errorf("State() = %v, want %v", got, tt.wantStateAtEnd)
			}
		})
	}
}
