package config

import (
	"strings"
	"testing"
)

func TestRoutesSection(t *testing.T) {
	const global = "[Global]\nregion = home\n"
	for _, tc := range []struct {
		name    string
		in      string
		enabled bool
		wait    bool // WaitForNodeRouters
		err     string
	}{
		{name: "no section: off", in: global},
		{name: "the section alone turns routes on, routers on the nodes", in: global + "[Routes]\n", enabled: true, wait: true},
		{name: "explicitly on", in: global + "[Routes]\nenabled = yes\n", enabled: true, wait: true},
		{name: "routers on gateways only", in: global + "[Routes]\nnode-routers = false\n", enabled: true},
		{name: "kept but off", in: global + "[Routes]\nenabled = false\n"},
		{name: "off, node routers or not", in: global + "[Routes]\nenabled = false\nnode-routers = true\n"},
		{name: "bad node-routers", in: global + "[Routes]\nnode-routers = maybe\n", err: ":4: [Routes] node-routers:"},
		{name: "takes no name", in: global + "[Routes \"pods\"]\n", err: ":3: [Routes \"pods\"]: this section takes no name; write [Routes]"},
		{name: "unknown key", in: global + "[Routes]\nenable = true\n", err: ":4: [Routes] enable: unknown key (did you mean enabled?)"},
		{name: "twice", in: global + "[Routes]\n[Routes]\n", err: ":4: [Routes]: section given twice, here and on line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("c.conf", []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Routes.Enabled != tc.enabled {
				t.Errorf("Routes.Enabled = %v, want %v", cfg.Routes.Enabled, tc.enabled)
			}
			if got := cfg.Routes.WaitForNodeRouters(); got != tc.wait {
				t.Errorf("Routes.WaitForNodeRouters() = %v, want %v", got, tc.wait)
			}
		})
	}
}
