package config

import (
	"strings"
	"testing"
	"time"
)

func TestOutOfService(t *testing.T) {
	const bmc = "bmc-url = https://10.0.9.11\nbmc-insecure-skip-verify = true\n"
	tests := []struct {
		name      string
		global    string
		machine   string
		want      OutOfService
		wantGrace time.Duration
	}{
		{name: "off by default", machine: bmc, want: OutOfServiceOff, wantGrace: DefaultOutOfServiceGrace},
		{name: "global taint", global: "bmc-out-of-service = Taint\nbmc-out-of-service-grace = 45s\n", machine: bmc, want: OutOfServiceTaint, wantGrace: 45 * time.Second},
		{name: "machine overrides global", global: "bmc-out-of-service = taint\n", machine: bmc + "bmc-out-of-service = off\n", want: OutOfServiceOff, wantGrace: DefaultOutOfServiceGrace},
		{name: "machine opts in", machine: bmc + "bmc-out-of-service = taint\n", want: OutOfServiceTaint, wantGrace: DefaultOutOfServiceGrace},
		{name: "never without a BMC", global: "bmc-out-of-service = taint\n", want: OutOfServiceOff, wantGrace: DefaultOutOfServiceGrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "[Global]\nregion = eu\n" + tt.global + "[Machine \"m\"]\n" + tt.machine
			c, err := Parse("c", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.OutOfServiceOf(c.Machines["m"]); got != tt.want {
				t.Errorf("OutOfServiceOf = %q, want %q", got, tt.want)
			}
			if c.Global.BMCOutOfServiceGrace != tt.wantGrace {
				t.Errorf("grace = %s, want %s", c.Global.BMCOutOfServiceGrace, tt.wantGrace)
			}
		})
	}
}

func TestOutOfServiceBad(t *testing.T) {
	src := "[Global]\nregion = eu\nbmc-out-of-service = yes\nbmc-out-of-service-grace = 0s\n[Machine \"m\"]\nbmc-out-of-service = taint\n"
	_, err := Parse("c", []byte(src))
	if err == nil {
		t.Fatal("parsed")
	}
	for _, want := range []string{
		`c:3: [Global] bmc-out-of-service: "yes" is not an out-of-service mode; use off or taint`,
		`c:4: [Global] bmc-out-of-service-grace: "0s" is not at least 1s`,
		`c:6: [Machine "m"] bmc-out-of-service: needs bmc-url`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestFence: bmc-fence is off by default; power-off applies only where the
// machine's Node is tainted out of service; a machine overrides [Global].
func TestFence(t *testing.T) {
	const bmc = "bmc-url = https://10.0.9.11\nbmc-insecure-skip-verify = true\n"
	tests := []struct {
		name      string
		global    string
		machine   string
		want      Fence
		wantAfter time.Duration
	}{
		{name: "off by default", global: "bmc-out-of-service = taint\n", machine: bmc, want: FenceOff, wantAfter: DefaultFenceAfter},
		{name: "global power-off", global: "bmc-out-of-service = taint\nbmc-fence = Power-Off\nbmc-fence-after = 90s\n", machine: bmc, want: FencePowerOff, wantAfter: 90 * time.Second},
		{name: "machine opts in", machine: bmc + "bmc-out-of-service = taint\nbmc-fence = power-off\n", want: FencePowerOff, wantAfter: DefaultFenceAfter},
		{name: "machine opts out", global: "bmc-out-of-service = taint\nbmc-fence = power-off\n", machine: bmc + "bmc-fence = off\n", want: FenceOff, wantAfter: DefaultFenceAfter},
		{name: "never without the out-of-service taint", global: "bmc-fence = power-off\n", machine: bmc, want: FenceOff, wantAfter: DefaultFenceAfter},
		{name: "never without a BMC", global: "bmc-out-of-service = taint\nbmc-fence = power-off\n", want: FenceOff, wantAfter: DefaultFenceAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c", []byte("[Global]\nregion = eu\n"+tt.global+"[Machine \"m\"]\n"+tt.machine))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.FenceOf(c.Machines["m"]); got != tt.want {
				t.Errorf("FenceOf = %q, want %q", got, tt.want)
			}
			if c.Global.BMCFenceAfter != tt.wantAfter {
				t.Errorf("fence after = %s, want %s", c.Global.BMCFenceAfter, tt.wantAfter)
			}
		})
	}
	_, err := Parse("c", []byte("[Global]\nregion = eu\nbmc-fence = reboot\nbmc-fence-after = 1m30\n"+
		"[Machine \"m\"]\nbmc-fence = power-off\n"+ // 5-6
		"[Machine \"n\"]\n"+bmc+"bmc-out-of-service = off\nbmc-fence = power-off\n")) // 7-11
	for _, want := range []string{
		`c:3: [Global] bmc-fence: "reboot" is not a fence mode; use off or power-off`,
		`c:4: [Global] bmc-fence-after: "1m30" is not a duration in whole seconds`,
		`c:6: [Machine "m"] bmc-fence: needs bmc-url`,
		`c:11: [Machine "n"] bmc-fence: power-off, but bmc-out-of-service = off`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
