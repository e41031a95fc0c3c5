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
		err     string
	}{
		{name: "no section: off", in: global},
		{name: "the section alone turns routes on", in: global + "[Routes]\n", enabled: true},
		{name: "explicitly on", in: global + "[Routes]\nenabled = yes\n", enabled: true},
		{name: "kept but off", in: global + "[Routes]\nenabled = false\n"},
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
		})
	}
}
