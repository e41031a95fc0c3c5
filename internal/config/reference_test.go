package config

import (
	"bytes"
	"flag"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/cloud-config.md and the errors of testdata/parse-bad")

const referencePath = "../../docs/cloud-config.md"

func TestReferenceUpToDate(t *testing.T) {
	want := MarkdownReference()
	if *update {
		if err := os.WriteFile(referencePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v; run go test ./internal/config -update", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/cloud-config.md is stale; run go test ./internal/config -update (-want +got):\n%s", diff)
	}
}

// TestReferenceExampleParses parses the example as the reference shows it.
func TestReferenceExampleParses(t *testing.T) {
	m := regexp.MustCompile("(?s)```ini\n(.*?)```").FindSubmatch(MarkdownReference())
	if m == nil {
		t.Fatal("the reference has no ```ini example")
	}
	if !bytes.Equal(m[1], []byte(exampleConfig)) {
		t.Error("the reference's example is not exampleConfig")
	}
	cfg, err := Parse("example.conf", m[1])
	if err != nil {
		t.Fatalf("the reference's example does not parse:\n%v", err)
	}
	// The example is meant to show every key.
	for _, k := range keys {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k.name) + ` =`).Match(m[1]) {
			t.Errorf("the example does not use key %s", k.name)
		}
	}
	if len(cfg.Machines) != 2 || len(cfg.Pools) != 3 || len(cfg.BGPPeers) != 2 {
		t.Errorf("example: %d machines, %d pools and %d BGP peers, want 2, 3 and 2", len(cfg.Machines), len(cfg.Pools), len(cfg.BGPPeers))
	}
}

// TestKeyTable checks the invariants of the key table that the decoder
// and the reference rely on.
func TestKeyTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range keys {
		id := sections[k.section].name + "." + k.name
		if seen[id] {
			t.Errorf("%s: listed twice", id)
		}
		seen[id] = true
		if !regexp.MustCompile(`^[a-z][a-z0-9-]*$`).MatchString(k.name) {
			t.Errorf("%s: a key name must be lowercase letters, digits and '-'", id)
		}
		if k.doc == "" || k.value.typeName == "" || k.value.typeDoc == "" || k.value.apply == nil {
			t.Errorf("%s: doc, type or decoder missing", id)
		}
		if k.required && (k.dflt != "" || k.dfltDoc != "") {
			t.Errorf("%s: a required key cannot have a default", id)
		}
		if k.dflt != "" {
			tgt := &target{global: &Global{}, machine: &Machine{}, pool: &Pool{}, routes: &Routes{}, peer: &BGPPeer{}, firstLine: map[string]int{}}
			if err := k.value.apply(tgt, k.dflt); err != nil {
				t.Errorf("%s: default %q does not parse: %v", id, k.dflt, err)
			}
		}
	}
	for i, s := range sections {
		if s.kind != sectionKind(i) {
			t.Errorf("sections[%d] is %s; sections must be indexed by kind", i, s.name)
		}
	}
}
