package membership

import (
	"bytes"
	"log"

	"k8s.io/klog/v2"
)

// newStdLogger routes memberlist's log lines ("[LEVEL] memberlist: ...")
// to klog: errors and warnings at verbosity 1 (they repeat on every probe
// while a host is away), informational lines at 2, debug at 4.
func newStdLogger(logger klog.Logger) *log.Logger {
	return log.New(logWriter{logger}, "", 0)
}

type logWriter struct{ logger klog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := 4
	for prefix, v := range map[string]int{"[ERR]": 1, "[WARN]": 1, "[INFO]": 2, "[DEBUG]": 4} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = v
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	w.logger.V(level).Info("Gossip", "message", string(line))
	return len(p), nil
}
