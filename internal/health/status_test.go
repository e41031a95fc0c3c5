package health

import "testing"

func TestStatusObserve(t *testing.T) {
	const ok, fail = true, false
	tests := []struct {
		name             string
		failure, success int
		results          []bool
		wantChanged      []bool
		wantHealthyAtEnd bool
	}{
		{
			name: "starts healthy", failure: 2, success: 1,
			results: nil, wantChanged: nil, wantHealthyAtEnd: true,
		},
		{
			name: "one failure is not enough", failure: 2, success: 1,
			results:     []bool{fail},
			wantChanged: []bool{false}, wantHealthyAtEnd: true,
		},
		{
			name: "down after two consecutive failures", failure: 2, success: 1,
			results:     []bool{fail, fail},
			wantChanged: []bool{false, true}, wantHealthyAtEnd: false,
		},
		{
			name: "a success resets the failure streak", failure: 2, success: 1,
			results:     []bool{fail, ok, fail, ok},
			wantChanged: []bool{false, false, false, false}, wantHealthyAtEnd: true,
		},
		{
			name: "up after one success", failure: 2, success: 1,
			results:     []bool{fail, fail, ok},
			wantChanged: []bool{false, true, true}, wantHealthyAtEnd: true,
		},
		{
			name: "up after two successes", failure: 2, success: 2,
			results:     []bool{fail, fail, ok, fail, ok, ok},
			wantChanged: []bool{false, true, false, false, false, true}, wantHealthyAtEnd: true,
		},
		{
			name: "further failures while down change nothing", failure: 1, success: 1,
			results:     []bool{fail, fail, fail},
			wantChanged: []bool{true, false, false}, wantHealthyAtEnd: false,
		},
		{
			name: "thresholds below one count as one", failure: 0, success: -1,
			results:     []bool{fail, ok},
			wantChanged: []bool{true, true}, wantHealthyAtEnd: true,
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
			if got := s.Healthy(); got != tt.wantHealthyAtEnd {
				t.Errorf("Healthy() = %v, want %v", got, tt.wantHealthyAtEnd)
			}
		})
	}
}
