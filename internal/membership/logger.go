package membership

import (
	"bytes"
	"log"
	"strings"

	"k8s.io/klog/v2"
)

// newStdLogger routes memberlist's log lines ("[LEVEL] memberlist: ...")
// to klog: errors and warnings at verbosity 1 (they repeat on every probe
// while a host is away), informational lines at the default level (they
// are memberlist's failure detection at work: a member suspected, a member
// marked failed, once each per failure), debug at 4. A line
// saying that a message could not be decrypted is also passed to
// onDecrypt with the sender's address ("" if the line names none), which
// counts it and reports it at the default level.
func newStdLogger(logger klog.Logger, onDecrypt func(from string)) *log.Logger {
	return log.New(logWriter{logger, onDecrypt}, "", 0)
}

type logWriter struct {
	logger    klog.Logger
	onDecrypt func(from string)
}

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := 4
	for prefix, v := range map[string]int{"[ERR]": 1, "[WARN]": 1, "[INFO]": 0, "[DEBUG]": 4} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = v
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	w.logger.V(level).Info("Gossip", "message", string(line))
	if from, ok := decryptFailure(string(line)); ok && w.onDecrypt != nil {
		w.onDecrypt(from)
	}
	return len(p), nil
}

// decryptFailure recognises memberlist's lines about a message it could
// not decrypt ("Decrypt packet failed: ... from=192.0.2.3:7947" for UDP,
// "failed to receive: No installed keys could decrypt the message
// from=192.0.2.3:41234" for TCP, "Failed to join 192.0.2.3:7947: no
// installed keys could decrypt the message" for the answer to a join) and
// returns the sender's address.
func decryptFailure(line string) (string, bool) {
	lower := strings.ToLower(line)
	if !strings.Contains(lower, "decrypt") {
		return "", false
	}
	fields := strings.Fields(line)
	for i, f := range fields {
		if from, ok := strings.CutPrefix(f, "from="); ok {
			return from, true
		}
		// "Failed to join 192.0.2.3:7947: no installed keys could decrypt
		// the message": the answer of the host joined.
		if f == "join" && i+1 < len(fields) {
			return strings.TrimSuffix(fields[i+1], ":"), true
		}
	}
	return "", true
}
