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
