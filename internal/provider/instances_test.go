package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/configwatch"
)

// fakePower is the BMC poller's cache, as the test sets it.
type fakePower map[string]bmc.Status

func (f fakePower) Status(machine string) (bmc.Status, bool) {
	s, ok := f[machine]
	return s, ok
}

const instancesConfig = `[Global]
region = home
authoritative-inventory = true
[Machine "with-bmc"]
bmc-url = https://10.0.9.1
bmc-insecure-skip-verify = true
[Machine "declared-off"]
state = shutdown
bmc-url = https://10.0.9.2
bmc-insecure-skip-verify = true
[Machine "no-bmc"]
`

func TestInstanceShutdownAndExistsWithBMC(t *testing.T) {
	cfg, err := config.Parse("cloud.conf", []byte(instancesConfig))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	polledWith := func(machine string) config.BMC { return *cfg.Machines[machine].BMC }
	answeredBy := func(b config.BMC, state string, age time.Duration) bmc.Status {
		return bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: state}, AnsweredAt: now.Add(-age), PolledAt: now.Add(-age), MaxAge: 90 * time.Second}
	}
	answered := func(state string, age time.Duration) bmc.Status {
		return answeredBy(polledWith("with-bmc"), state, age)
	}
	otherBMC := polledWith("with-bmc")
	otherBMC.URL = "https://10.0.9.99"
	failed := func(old bmc.Status, reason string) bmc.Status {
		old.Err, old.Reason = errors.New(reason), reason
		return old
	}
	tests := []struct {
		name         string
		node         string
		power        fakePower
		wantShutdown bool
	}{
		{name: "BMC says off", node: "with-bmc", power: fakePower{"with-bmc": answered("Off", 10*time.Second)}, wantShutdown: true},
		{name: "an answer of the BMC before the cloud-config changed it", node: "with-bmc", power: fakePower{"with-bmc": answeredBy(otherBMC, "Off", time.Second)}},
		{name: "BMC says on", node: "with-bmc", power: fakePower{"with-bmc": answered("On", 10*time.Second)}},
		{name: "BMC said off too long ago", node: "with-bmc", power: fakePower{"with-bmc": answered("Off", 91*time.Second)}},
		{name: "BMC said off, then timed out", node: "with-bmc", power: fakePower{"with-bmc": failed(answered("Off", 5*time.Second), bmc.ReasonTimeout)}},
		{name: "BMC unauthorized", node: "with-bmc", power: fakePower{"with-bmc": failed(bmc.Status{MaxAge: time.Minute}, bmc.ReasonUnauthorized)}},
		{name: "BMC not polled yet", node: "with-bmc", power: fakePower{}},
		{name: "inventory says shutdown, BMC says on", node: "declared-off", power: fakePower{"declared-off": answeredBy(polledWith("declared-off"), "On", time.Second)}, wantShutdown: true},
		{name: "no BMC in the config: a stale cache entry is not read", node: "no-bmc", power: fakePower{"no-bmc": answered("Off", time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := instances{config: configwatch.New("", cfg, []byte(instancesConfig), 0), power: tt.power, now: func() time.Time { return now }}
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: tt.node}}
			got, err := i.InstanceShutdown(context.Background(), node)
			if err != nil || got != tt.wantShutdown {
				t.Errorf("InstanceShutdown = %v, %v; want %v", got, err, tt.wantShutdown)
			}
			// A BMC never makes a machine gone, whatever it says.
			if exists, err := i.InstanceExists(context.Background(), node); err != nil || !exists {
				t.Errorf("InstanceExists = %v, %v; want true", exists, err)
			}
		})
	}
}
