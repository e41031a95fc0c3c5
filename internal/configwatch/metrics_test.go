package configwatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/component-base/metrics/testutil"

	"github.com/groundcloud/groundcloud/internal/config"
)

// TestReloadSuccessful: the gauge says whether the file as it is now is in
// force, also when a refused change is seen again unchanged, and after the
// file was unreadable for a moment.
func TestReloadSuccessful(t *testing.T) {
	RegisterMetrics()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cloud.conf")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const broken = "[Global]\nregion = home\n[Machine \"c\"]\nbogus = 1\n"
	write(good)
	initial, err := config.Parse(path, []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	w := New(path, initial, []byte(good), 0)
	steps := []struct {
		name string
		do   func()
		want float64
	}{
		{"the initial file", func() {}, 1},
		{"a broken change", func() { write(broken) }, 0},
		{"the broken file again", func() {}, 0},
		{"the broken file gone", func() { _ = os.Remove(path) }, 0},
		{"the broken file back", func() { write(broken) }, 0},
		{"a good change", func() { write(good) }, 1},
		{"the good file gone", func() { _ = os.Remove(path) }, 0},
		{"the good file back", func() { write(good) }, 1},
	}
	for _, s := range steps {
		s.do()
		w.Check(ctx)
		got, err := testutil.GetGaugeMetricValue(lastReloadSuccessful)
		if err != nil {
			t.Fatal(err)
		}
		if got != s.want {
			t.Errorf("after %s: groundcloud_cloud_config_last_reload_successful = %v, want %v", s.name, got, s.want)
		}
	}
	for _, result := range []string{resultApplied, resultInvalid, resultUnreadable} {
		if _, err := testutil.GetCounterMetricValue(reloads.WithLabelValues(result)); err != nil {
			t.Errorf("reloads_total{result=%q}: %v", result, err)
		}
	}
}
