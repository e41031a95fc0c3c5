package configwatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/groundcloud/groundcloud/internal/config"
)

const good = "[Global]\nregion = home\n\n[Machine \"a\"]\nzone = z1\n"

func TestCheck(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cloud.conf")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	initial, err := config.Parse(path, []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	w := New(path, initial, []byte(good), 0)

	if w.Check(ctx) {
		t.Errorf("unchanged file applied again")
	}

	write(good + "\n[Machine \"b\"]\nzone = z2\n")
	if !w.Check(ctx) {
		t.Fatalf("changed file not applied")
	}
	if _, ok := w.Current().Machine("b"); !ok {
		t.Fatalf("machine b missing after reload")
	}

	applied := w.Current()
	write("[Global]\nregion = home\n[Machine \"c\"]\nbogus = 1\n")
	if w.Check(ctx) {
		t.Fatalf("broken file applied")
	}
	if w.Current() != applied {
		t.Fatalf("broken file replaced the last good configuration")
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if w.Check(ctx) || w.Current() != applied {
		t.Fatalf("missing file changed the configuration")
	}

	write(good)
	if !w.Check(ctx) {
		t.Fatalf("good file after a broken one not applied")
	}
	if _, ok := w.Current().Machine("b"); ok {
		t.Fatalf("machine b still present")
	}
}
