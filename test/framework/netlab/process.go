package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StopGrace is how long a process gets between SIGTERM and SIGKILL.
const StopGrace = 5 * time.Second

// Process is a long-running command in a host's namespace, in a process
// group of its own, with stdout and stderr appended to a log file.
type Process struct {
	Host *Host
	// LogPath is the log file (empty: output discarded).
	LogPath string

	cmd      *exec.Cmd
	logStart int64 // the log's size before this process wrote to it
	done     chan struct{}
	err      error // Wait's result; read only after done is closed
	stopOnce sync.Once
}

// Start starts name in the host's namespace and returns once it runs. It
// is stopped (see Process.Stop) when ctx is done or the lab is closed, and
// killed by the kernel if this process dies first (Pdeathsig).
func (h *Host) Start(ctx context.Context, logPath string, name string, args ...string) (*Process, error) {
	return h.StartCmd(ctx, logPath, h.Command(context.Background(), name, args...))
}

// StartCmd is Start for a command built by the caller, such as one from
// Nsenter: cmd must run inside the host's namespace, and its Stdout, Stderr
// and SysProcAttr are the lab's to set.
func (h *Host) StartCmd(ctx context.Context, logPath string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{Host: h, LogPath: logPath, done: make(chan struct{}), cmd: cmd}
	name, args := cmd.Path, cmd.Args[1:]
	if logPath != "" { // else os/exec connects both to /dev/null
		out, err := p.openLog(name, args)
		if err != nil {
			return nil, fmt.Errorf("start %s in %s: %w", name, h.Name, err)
		}
		defer out.Close() // the child holds its own descriptor
		p.cmd.Stdout, p.cmd.Stderr = out, out
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // Stop signals the whole group
		Pdeathsig: syscall.SIGKILL, // see spawner
	}
	if err := h.lab.start(p); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, h.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		h.lab.forget(p)
	}()
	stop := context.AfterFunc(ctx, func() { _ = p.Stop() })
	go func() {
		<-p.done
		stop()
	}()
	return p, nil
}

func (p *Process) openLog(name string, args []string) (*os.File, error) {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "--- lab %s: host %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.Host.Name, name, strings.Join(args, " "))
	if p.logStart, err = f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Pid is the process's id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the process exited (nil for status 0); nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, SIGKILL after StopGrace, waits
// for the process and returns how it exited: nil for a clean exit, an
// *exec.ExitError otherwise (also when it had exited before). Safe to call
// more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		pgid := p.Pid()
		select {
		case <-p.done:
			return // never signal a group id that may have been reused
		default:
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what the process left in its group
	})
	<-p.done
	return p.err
}

// Output returns what the process has written to its log so far.
func (p *Process) Output() string {
	if p.LogPath == "" {
		return ""
	}
	f, err := os.Open(p.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, p.logStart, 1<<40))
	return string(b)
}

// WaitForOutput waits until the process has written s to its log. It fails
// when the process exits first or ctx is done, with the log's tail.
func (p *Process) WaitForOutput(ctx context.Context, s string) error {
	if p.LogPath == "" {
		return errors.New("wait for output: process has no log")
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		out := p.Output()
		if strings.Contains(out, s) {
			return nil
		}
		select {
		case <-p.done:
			if out := p.Output(); strings.Contains(out, s) {
				return nil
			}
			return fmt.Errorf("wait for %q: process exited (%v); log %s ends:\n%s", s, p.err, p.LogPath, tail(p.Output(), 20))
		case <-ctx.Done():
			return fmt.Errorf("wait for %q: %w; log %s ends:\n%s", s, ctx.Err(), p.LogPath, tail(out, 20))
		case <-tick.C:
		}
	}
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// start starts p's command from the lab's spawner and tracks p until it
// exits.
func (l *Lab) start(p *Process) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errClosed
	}
	if l.spawner == nil {
		l.spawner = newSpawner()
	}
	if err := l.spawner.start(p.cmd); err != nil {
		return err
	}
	l.procs[p] = true
	return nil
}

func (l *Lab) forget(p *Process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.procs, p)
}

// spawner starts commands from one goroutine locked to its OS thread for
// the lab's whole life. Pdeathsig is delivered when the *thread* that forked
// the child exits, and the Go runtime ends a thread whenever a goroutine
// exits while locked to it (as Do does when it cannot restore a thread), so
// a child forked from an arbitrary goroutine can be killed at a random time.
// This thread exits only when the lab closes, after its children are gone,
// or with the whole process, which is when Pdeathsig should fire.
type spawner struct {
	reqs chan spawnRequest
}

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the loop
		for r := range s.reqs {
			r.result <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	r := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	s.reqs <- r
	return <-r.result
}

func (s *spawner) close() { close(s.reqs) }
