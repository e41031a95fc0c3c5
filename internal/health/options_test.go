package health

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr []string // substrings, all of them
	}{
		{name: "zero means defaults", opts: Options{}},
		{name: "agent defaults", opts: Options{Interval: 2 * time.Second, Timeout: time.Second, FailureThreshold: 2, SuccessThreshold: 1}},
		{name: "timeout equal to interval", opts: Options{Interval: time.Second, Timeout: time.Second}},
		{name: "short interval takes a shorter default timeout", opts: Options{Interval: 300 * time.Millisecond}},
		{
			name:    "every negative field reported at once",
			opts:    Options{Interval: -1, Timeout: -1, FailureThreshold: -1, SuccessThreshold: -1, Concurrency: -1},
			wantErr: []string{"interval", "timeout", "failure threshold", "success threshold", "concurrency"},
		},
		{
			name:    "timeout longer than interval",
			opts:    Options{Interval: time.Second, Timeout: 2 * time.Second},
			wantErr: []string{"timeout 2s must not exceed the interval 1s"},
		},
		{
			name:    "timeout longer than default interval",
			opts:    Options{Timeout: 3 * time.Second},
			wantErr: []string{"timeout 3s must not exceed the interval 2s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tt.wantErr)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Validate() = %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{Interval: 2 * time.Second, Timeout: time.Second, FailureThreshold: 2, SuccessThreshold: 1, Concurrency: 32}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("withDefaults() (-want +got):\n%s", diff)
	}
}
