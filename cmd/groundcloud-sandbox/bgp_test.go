package main

import (
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestSweepRouter: a sweep removes the router directory a crashed sandbox
// recorded, and the record; without a record it removes nothing; a record
// naming another directory is refused and that directory kept.
func TestSweepRouter(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	router, err := os.MkdirTemp("", "groundcloud-frr-*")
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, tt := range []struct {
		name    string
		record  string // "": none
		wantErr bool
		gone    string
		kept    string
	}{
		{name: "no record", kept: router},
		{name: "another directory recorded", record: other, wantErr: true, kept: other},
		{name: "the router's directory recorded", record: router, gone: router},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.record != "" {
				if err := os.WriteFile(frrRecord(dir), []byte(tt.record+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := sweepRouter(dir)
			if (err != nil) != tt.wantErr {
				t.Errorf("sweepRouter = %v, want error %v", err, tt.wantErr)
			}
			if tt.gone != "" && exists(tt.gone) {
				t.Errorf("%s left", tt.gone)
			}
			if tt.kept != "" && !exists(tt.kept) {
				t.Errorf("%s removed", tt.kept)
			}
			if !tt.wantErr && exists(frrRecord(dir)) {
				t.Errorf("record left")
			}
		})
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
