package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Result is one spec's outcome in the suite's JUnit report.
type Result struct {
	Name    string
	Seconds float64
	// State is "passed", "failed" or "skipped"; Message says why for the
	// last two.
	State, Message string
}

type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads the specs' results of a JUnit report, leaving out the
// suite's own nodes ([SynchronizedBeforeSuite], [ReportAfterSuite], ...).
func ReadJUnit(path string) ([]Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Result
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			r := Result{Name: c.Name, Seconds: c.Time, State: "passed"}
			switch {
			case c.Failure != nil:
				r.State, r.Message = "failed", firstNonEmpty(c.Failure.Message, c.Failure.Text)
			case c.Error != nil:
				r.State, r.Message = "failed", firstNonEmpty(c.Error.Message, c.Error.Text)
			case c.Skipped != nil:
				r.State, r.Message = "skipped", c.Skipped.Message
			}
			if suiteNode(r.Name) && r.State != "failed" {
				continue
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// Focused are the results of the specs whose names re matches: the
// report also lists every spec the focus left out, as skipped.
func Focused(results []Result, re *regexp.Regexp) []Result {
	var out []Result
	for _, r := range results {
		if re.MatchString(r.Name) {
			out = append(out, r)
		}
	}
	return out
}

// suiteNode: a report entry of the suite's setup or reporting, not a spec.
func suiteNode(name string) bool {
	return strings.HasPrefix(name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(name, "[SynchronizedAfterSuite]") ||
		strings.HasPrefix(name, "[BeforeSuite]") || strings.HasPrefix(name, "[AfterSuite]") ||
		strings.HasPrefix(name, "[ReportBeforeSuite]") || strings.HasPrefix(name, "[ReportAfterSuite]")
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
