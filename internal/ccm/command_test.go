package ccm

import "testing"

// TestDefaults checks the defaults groundcloud sets on upstream flags; the
// command must still accept the flags to override them.
func TestDefaults(t *testing.T) {
	cmd, err := NewCommand()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cloud-provider":               "groundcloud",
		"concurrent-service-syncs":     "10",
		"leader-elect-resource-name":   "groundcloud-controller-manager",
		"cloud-config-reload-interval": "2s",
		"leader-elect":                 "true",
		"kube-api-qps":                 "300",
		"kube-api-burst":               "500",
		"load-balancer-class-only":     "false",
	}
	for name, def := range want {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, def)
		}
	}
	if err := cmd.Flags().Parse([]string{"--concurrent-service-syncs=3"}); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("concurrent-service-syncs").Value.String(); got != "3" {
		t.Errorf("--concurrent-service-syncs=3 gives %q", got)
	}
}
