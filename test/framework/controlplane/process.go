package controlplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// errAddrInUse marks a child that died because its port was taken between
// picking it and binding it.
var errAddrInUse = errors.New("address already in use")

// stopGrace is how long a child gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// process is a child in its own process group, with stdout and stderr
// appended to a log file.
type process struct {
	name    string
	logPath string
	// logStart is the log's size before this run, so waits look only at
	// this run's output.
	logStart int64
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // the result of Wait; read only after done is closed
}

// startProcess starts bin and calls started (when not nil) with its pid.
func startProcess(name, bin string, args []string, logPath string, started func(int) error) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	fi, err := logFile.Stat()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fmt.Fprintf(logFile, "--- testbed %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // Stop signals the whole group
		Pdeathsig: syscall.SIGKILL, // and the kernel kills it if we die first
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logStart: fi.Size(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if started != nil {
		if err := started(cmd.Process.Pid); err != nil {
			p.stop(0)
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exitError reports how the process ended, with the tail of its log and
// errAddrInUse when that was the cause; nil while it runs.
func (p *process) exitError() error {
	select {
	case <-p.done:
	default:
		return nil
	}
	out := p.output()
	err := fmt.Errorf("%s exited (%v); log %s ends:\n%s", p.name, p.err, p.logPath, tailLines(out, 30))
	if strings.Contains(out, "address already in use") {
		return fmt.Errorf("%w: %w", errAddrInUse, err)
	}
	return err
}

// output returns what this run has logged so far.
func (p *process) output() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, p.logStart, 1<<40))
	return string(b)
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the child to be reaped. It reports whether SIGKILL was needed,
// and how the child ended if it had exited before being asked to (a crash
// the caller should hear of).
func (p *process) stop(grace time.Duration) (killed bool, exitedEarly error) {
	pgid := p.pid() // Setpgid makes the child its group's leader
	select {
	case <-p.done:
		exitedEarly = p.exitError()
	default:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Anything the child left in its group goes with it.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return killed, exitedEarly
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// LogTail returns the last n lines of the file at path, or a note why it
// cannot.
func LogTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const window = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	off := max(fi.Size()-window, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, window))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return tailLines(string(b), n)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}
