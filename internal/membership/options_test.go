package membership

import (
	"strings"
	"testing"
	"time"
)

// TestValidateAddressProbes: the defaults pass; out-of-range probe counts
// and spacings are refused with the flag named; no spacing is checked
// when probes are off.
func TestValidateAddressProbes(t *testing.T) {
	o := NewOptions()
	o.KeyFile = "/etc/groundcloud/gossip.key"
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		probes  int
		spacing time.Duration
		want    string
	}{
		{-1, 100 * time.Millisecond, "--address-probes -1 must be 0 to 10"},
		{11, 100 * time.Millisecond, "--address-probes 11 must be 0 to 10"},
		{3, time.Millisecond, "--address-probe-spacing 1ms must be 10ms to 2s"},
		{3, 3 * time.Second, "--address-probe-spacing 3s must be 10ms to 2s"},
		{0, 0, ""},
	} {
		o.AddressProbes, o.AddressProbeSpacing = c.probes, c.spacing
		err := o.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("probes %d spacing %s: %v, want %q", c.probes, c.spacing, err, c.want)
		}
	}
}
