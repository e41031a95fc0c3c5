package conformance

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
)

// Skip is a line of skips.txt: a spec a lane does not run, and why.
type Skip struct {
	// Lanes are lane names or patterns (path.Match: "*-proxy").
	Lanes []string
	// Spec is part of the spec's full name.
	Spec, Reason string
	Line         int
}

// readSkips reads skips.txt (the test's working directory is the package's).
func readSkips() ([]byte, error) { return os.ReadFile("skips.txt") }

// ParseSkips parses skips.txt, reporting every bad line at once.
func ParseSkips(data []byte) ([]Skip, error) {
	var out []Skip
	var errs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 3 {
			errs = append(errs, fmt.Sprintf("line %d: want \"<lanes> | <spec> | <reason>\"", n))
			continue
		}
		s := Skip{Spec: strings.TrimSpace(f[1]), Reason: strings.TrimSpace(f[2]), Line: n}
		for _, l := range strings.Split(f[0], ",") {
			l = strings.TrimSpace(l)
			if _, err := path.Match(l, ""); err != nil || l == "" {
				errs = append(errs, fmt.Sprintf("line %d: lane pattern %q: want a lane name or a pattern", n, l))
				continue
			}
			s.Lanes = append(s.Lanes, l)
		}
		if s.Spec == "" || s.Reason == "" {
			errs = append(errs, fmt.Sprintf("line %d: a skip needs a spec and a reason", n))
			continue
		}
		out = append(out, s)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("skips.txt: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// For are the skips of a lane.
func For(skips []Skip, lane string) []Skip {
	var out []Skip
	for _, s := range skips {
		for _, p := range s.Lanes {
			if ok, _ := path.Match(p, lane); ok {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// SkipRegexp is the -ginkgo.skip of skips ("" for none).
func SkipRegexp(skips []Skip) string {
	parts := make([]string, len(skips))
	for i, s := range skips {
		parts[i] = regexp.QuoteMeta(s.Spec)
	}
	return strings.Join(parts, "|")
}

// Listed is the skip whose spec is part of name, if any.
func Listed(skips []Skip, name string) (Skip, bool) {
	for _, s := range skips {
		if strings.Contains(name, s.Spec) {
			return s, true
		}
	}
	return Skip{}, false
}
