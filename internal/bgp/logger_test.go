package bgp

import (
	"bytes"
	"strings"
	"testing"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"k8s.io/klog/v2/textlogger"
)

func TestLoggerRedactsPasswords(t *testing.T) {
	var buf bytes.Buffer
	cfg := textlogger.NewConfig(textlogger.Output(&buf), textlogger.Verbosity(4))
	l := gobgpLogger{logger: textlogger.NewLogger(cfg), secrets: []string{"s3cret-md5"}}
	conf := apiPeer(Peer{Name: "tor", Password: "s3cret-md5", Families: []string{"ipv4"}}, false)
	l.Info("Add a peer configuration", gobgplog.Fields{"Key": "10.0.0.1", "Config": conf})
	l.Error("failed with s3cret-md5 in the message", gobgplog.Fields{"Topic": "Peer"})
	out := buf.String()
	if strings.Contains(out, "s3cret-md5") {
		t.Errorf("log shows the password:\n%s", out)
	}
	if strings.Count(out, "<redacted>") != 2 || !strings.Contains(out, "10.0.0.1") {
		t.Errorf("want the password redacted twice and the rest kept, got:\n%s", out)
	}
}

func TestParseCommunity(t *testing.T) {
	for in, want := range map[string]uint32{"0:0": 0, "1:2": 1<<16 | 2, "65535:65535": 0xffffffff} {
		if got, err := parseCommunity(in); err != nil || got != want {
			t.Errorf("parseCommunity(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "1:65536", "a:b", ":1"} {
		if _, err := parseCommunity(in); err == nil {
			t.Errorf("parseCommunity(%q): no error", in)
		}
	}
}
