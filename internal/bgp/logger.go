package bgp

import (
	"fmt"
	"strings"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"k8s.io/klog/v2"
)

// gobgpLogger hands GoBGP's log lines to klog: errors and warnings as
// they are, information at V(2), debug at V(4). Any field whose text holds
// a peer's password is redacted, so that no configuration GoBGP logs
// shows one.
type gobgpLogger struct {
	logger  klog.Logger
	secrets []string
}

var _ gobgplog.Logger = gobgpLogger{}

func (l gobgpLogger) kv(fields gobgplog.Fields) []any {
	out := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		var val any = v
		text := fmt.Sprint(v)
		for _, s := range l.secrets {
			if s != "" && strings.Contains(text, s) {
				val = "<redacted>"
				break
			}
		}
		out = append(out, k, val)
	}
	return out
}

func (l gobgpLogger) redact(msg string) string {
	for _, s := range l.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
		}
	}
	return msg
}

func (l gobgpLogger) Panic(msg string, f gobgplog.Fields) { l.Error(msg, f) }
func (l gobgpLogger) Fatal(msg string, f gobgplog.Fields) { l.Error(msg, f) }
func (l gobgpLogger) Error(msg string, f gobgplog.Fields) {
	l.logger.Error(nil, "GoBGP: "+l.redact(msg), l.kv(f)...)
}
func (l gobgpLogger) Warn(msg string, f gobgplog.Fields) {
	l.logger.Info("GoBGP: "+l.redact(msg), l.kv(f)...)
}
func (l gobgpLogger) Info(msg string, f gobgplog.Fields) {
	l.logger.V(2).Info("GoBGP: "+l.redact(msg), l.kv(f)...)
}
func (l gobgpLogger) Debug(msg string, f gobgplog.Fields) {
	l.logger.V(4).Info("GoBGP: "+l.redact(msg), l.kv(f)...)
}
func (gobgpLogger) SetLevel(gobgplog.LogLevel) {}
func (l gobgpLogger) GetLevel() gobgplog.LogLevel {
	if l.logger.V(4).Enabled() {
		return gobgplog.DebugLevel
	}
	return gobgplog.InfoLevel
}
