package config

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds are good and bad files; the fuzzer mutates them.
var fuzzSeeds = []string{
	"",
	"[Global]\nregion = eu\n",
	exampleConfig,
	"\ufeff[Global]\r\nregion = eu\r\n",
	"[Global]\nregion = \"e\\\"u\" ; c\nauthoritative-inventory\n",
	"[Global]\nregion = eu\n[Machine \"web-1\"]\nzone = a\\\nb\nlabel = k=v\nstate = GONE\n",
	"[Global]\nregion = eu\n[Pool \"a\"]\naddresses = 192.0.2.0/28\n[Pool \"b\"]\naddresses = 192.0.2.8-192.0.2.20\n",
	"[Global]\nregion = eu\n[Pool \"a\"]\naddresses = 2001:db8::/120\naddresses = 2001:db8::ff-2001:db8::1ff\nauto-assign = off\n",
	"[Global \"x\"]\n[Machine]\n[Machine \"\"]\n[Machine.x]\n[Pool \"a\"\nzoen\n",
	"region = eu\n[Global]\n= x\n\"y\" = z\nkey \x00 = \xff\n",
	"[Global]\nregion = eu\n[Machine \"a\"]\ninternal-ip = ::ffff:1.2.3.4\nexternal-ip = fe80::1%eth0\nlabel = topology.kubernetes.io/zone=a\n",
	"[Global]\nregion = eu\n[Pool \"a\"]\naddresses = 0.0.0.0/0\naddresses = ::/0\n",
	"[Global]\nregion = eu\n[Pool \"a\"]\naddresses = 126.255.255.255-127.0.0.0\naddresses = fe80::/10\naddresses = 192.0.2.0-255.255.255.255\n",
	"[Global]\nregion = eu\n[Pool \"a\"]\naddresses = 223.255.255.0/24\naddresses = 169.253.255.255/32\naddresses = 255.255.255.253-255.255.255.254\naddresses = fec0::/10\naddresses = ::2-::ffff:ffff\n",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		cfg, err := Parse("fuzz.conf", data)
		if !bytes.Equal(in, data) {
			t.Fatal("Parse changed its input")
		}
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned both a Config and %v", err)
			}
			checkErrors(t, err, data)
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a Config nor an error")
		}
		again, err := Parse("fuzz.conf", data)
		if err != nil {
			t.Fatalf("second Parse of the same bytes failed: %v", err)
		}
		if !cmp.Equal(cfg, again, cmpConfig) {
			t.Fatalf("second Parse differs (-first +second):\n%s", cmp.Diff(cfg, again, cmpConfig))
		}
		checkConfig(t, cfg)
	})
}

// checkErrors checks the invariants of a failed Parse.
func checkErrors(t *testing.T, err error, data []byte) {
	var errs Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		t.Fatalf("error %v is not a non-empty Errors", err)
	}
	lines := bytes.Count(data, []byte("\n")) + 1
	for _, e := range errs {
		switch {
		case e.Line < 0 || e.Line > lines:
			t.Errorf("line %d outside the file's %d lines: %v", e.Line, lines, e)
		case e.Line == 0 && (e.Section != "" || e.Key != ""):
			t.Errorf("a problem of a section or key has no line: %v", e)
		case e.Msg == "" || e.File != "fuzz.conf":
			t.Errorf("problem without a message or file: %#v", e)
		case strings.Contains(e.Error(), "\n"):
			t.Errorf("problem spans lines: %q", e.Error())
		}
	}
	if !slices.IsSortedFunc(errs, func(a, b *Error) int { return a.Line - b.Line }) {
		t.Errorf("problems not sorted by line:\n%v", err)
	}
}

// checkConfig checks the invariants of a successful Parse.
func checkConfig(t *testing.T, cfg *Config) {
	if cfg.Global.Region == "" {
		t.Error("no region")
	}
	for name, m := range cfg.Machines {
		if m.Name != name || m.Region == "" || m.State == "" {
			t.Errorf("machine %q: name %q, region %q, state %q", name, m.Name, m.Region, m.State)
		}
	}
	var all []AddrRange
	for _, p := range cfg.Pools {
		if len(p.Ranges) == 0 {
			t.Errorf("pool %q has no ranges", p.Name)
		}
		for _, r := range p.Ranges {
			if r.Last.Less(r.First) || r.First.Is4() != r.Last.Is4() {
				t.Errorf("pool %q: bad range %v", p.Name, r)
			}
			for _, u := range unusableBlocks {
				if u.block.overlaps(r) {
					t.Errorf("pool %q: %v contains %v", p.Name, r, u)
				}
			}
			for _, o := range all {
				if o.overlaps(r) {
					t.Errorf("pool %q: %v overlaps %v", p.Name, r, o)
				}
			}
			all = append(all, r)
		}
	}
}
