package membership

import (
	"testing"
	"time"
)

func TestReadiness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	healthy := Health{Joined: true}
	none, idle, serving := Peers{}, Peers{Alive: true}, Peers{Alive: true, Serving: true}
	sick := Health{Joined: true, Problem: "interface eth0 is down"}
	type step struct {
		at     time.Duration
		health Health
		peers  Peers
		want   State
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"starting until joined", []step{
			{0, Health{}, none, StateStarting},
			{time.Second, healthy, none, StateReady},
		}},
		{"lone host or cold start: ready at once", []step{
			{0, healthy, none, StateReady},
			{time.Second, sick, none, StateUnhealthy},
			{2 * time.Second, healthy, none, StateReady},
		}},
		{"joining serving members: hold-down first", []step{
			{0, Health{}, none, StateStarting},
			{time.Second, healthy, serving, StateHoldDown},
			{5 * time.Second, healthy, serving, StateHoldDown},
			{11 * time.Second, healthy, serving, StateReady},
		}},
		{"back from unhealthy after seeing a peer: hold-down, even if alone now (cut off)", []step{
			{0, healthy, none, StateReady},
			{time.Second, healthy, serving, StateReady},
			{2 * time.Second, sick, none, StateUnhealthy},
			{3 * time.Second, healthy, none, StateHoldDown},
			{13 * time.Second, healthy, none, StateReady},
		}},
		{"a flap during hold-down starts it again", []step{
			{0, healthy, serving, StateHoldDown},
			{5 * time.Second, sick, serving, StateUnhealthy},
			{6 * time.Second, healthy, serving, StateHoldDown},
			{11 * time.Second, healthy, serving, StateHoldDown},
			{16 * time.Second, healthy, serving, StateReady},
		}},
		{"started with others, none serving yet: ready at once", []step{
			{0, Health{}, idle, StateStarting},
			{time.Second, healthy, idle, StateReady},
		}},
		{"holding down while the others stop serving: ready at once", []step{
			{0, healthy, serving, StateHoldDown},
			{2 * time.Second, healthy, serving, StateHoldDown},
			{3 * time.Second, healthy, idle, StateReady},
		}},
		{"back from unhealthy while the others are unhealthy too: ready at once", []step{
			{0, healthy, serving, StateHoldDown},
			{11 * time.Second, healthy, idle, StateReady},
			{12 * time.Second, sick, idle, StateUnhealthy},
			{13 * time.Second, healthy, idle, StateReady},
		}},
		{"ready stays ready while healthy", []step{
			{0, healthy, none, StateReady},
			{time.Second, healthy, serving, StateReady},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReadiness(10 * time.Second)
			for i, s := range tt.steps {
				r.update(t0.Add(s.at), s.health, s.peers)
				if r.state != s.want {
					t.Fatalf("step %d (%s): state %s, want %s", i, s.at, r.state, s.want)
				}
				if s.want == StateHoldDown && r.wake().IsZero() {
					t.Fatalf("step %d: hold-down without a wake time", i)
				}
			}
		})
	}
}

func TestReadinessNoHoldDown(t *testing.T) {
	r := newReadiness(0)
	r.update(time.Unix(0, 0), Health{Joined: true}, Peers{Alive: true, Serving: true})
	if r.state != StateReady {
		t.Errorf("hold-down 0: state %s, want Ready", r.state)
	}
}

func TestCandidates(t *testing.T) {
	peers := []Member{
		{Name: "lb-2", State: StateReady},
		{Name: "lb-3", State: StateHoldDown},
		{Name: "lb-4", State: StateUnhealthy},
		{Name: "lb-5", State: StateReady},
		{Name: "lb-1", State: StateUnhealthy}, // stale view of ourselves
	}
	if got := candidates("lb-1", StateReady, peers); !equal(got, []string{"lb-1", "lb-2", "lb-5"}) {
		t.Errorf("ready self: %v", got)
	}
	if got := candidates("lb-1", StateHoldDown, peers); !equal(got, []string{"lb-2", "lb-5"}) {
		t.Errorf("self in hold-down: %v", got)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMeta(t *testing.T) {
	m := meta{State: StateHoldDown, MAC: "02:00:00:00:00:01"}
	got, err := decodeMeta(encodeMeta(m))
	if err != nil || got.State != m.State || got.MAC != m.MAC || got.Version != metaVersion {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	if len(encodeMeta(m)) > 512 {
		t.Error("metadata over memberlist's 512 bytes")
	}
	for _, bad := range []string{"{", `{"state":"Leader"}`} {
		if got, err := decodeMeta([]byte(bad)); err == nil || got.State != StateStarting {
			t.Errorf("decode %s: %+v, %v; want an error and Starting", bad, got, err)
		}
	}
	if got, err := decodeMeta(nil); err != nil || got.State != StateStarting {
		t.Errorf("empty: %+v, %v", got, err)
	}
}
