package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// The groundcloud components of the scale benchmark run as deploy/ runs
// them: the controller manager's two replicas (one leads) and the agent
// DaemonSet. Their processes are found through containerd, their logs are
// the kubelet's files of their containers.
const (
	ccmName       = "groundcloud-controller-manager"
	ccmContainer  = "controller-manager"
	agentContainr = "agent"
)

// setArgs gives the first container of the kube-system workload (kind
// "DaemonSet" or "Deployment") the arguments of deploy/ plus extra (an
// extra flag replaces deploy/'s of that name) and waits until every Pod
// runs them and no other is left.
func setArgs(t *testing.T, c *realcluster.Cluster, kind, name string, extra ...string) {
	t.Helper()
	rollOut(t, c, kind, name, "with "+strings.Join(extra, " "), func(meta *metav1.ObjectMeta, tpl *v1.PodTemplateSpec) {
		ctr := &tpl.Spec.Containers[0]
		if meta.Annotations["groundcloud.io/bench-base-args"] == "" {
			if meta.Annotations == nil {
				meta.Annotations = map[string]string{}
			}
			meta.Annotations["groundcloud.io/bench-base-args"] = strings.Join(ctr.Args, "\n")
		}
		args := strings.Split(meta.Annotations["groundcloud.io/bench-base-args"], "\n")
		for _, e := range extra {
			flag, _, _ := strings.Cut(e, "=")
			args = slices.DeleteFunc(args, func(a string) bool { return a == flag || strings.HasPrefix(a, flag+"=") })
		}
		ctr.Args = append(args, extra...)
	})
}

// restartWorkload rolls the kube-system workload out again unchanged, as
// `kubectl rollout restart` does, and waits until it has.
func restartWorkload(t *testing.T, c *realcluster.Cluster, kind, name string) {
	t.Helper()
	must(t, c.RolloutRestart(t.Context(), kind, name))
	t.Logf("%s %s restarted", kind, name)
}

// rollOut changes the Pod template of the kube-system workload (kind
// "DaemonSet" or "Deployment") with mutate and waits until every Pod runs
// the new one and no other is left.
func rollOut(t *testing.T, c *realcluster.Cluster, kind, name, what string, mutate func(*metav1.ObjectMeta, *v1.PodTemplateSpec)) {
	t.Helper()
	must(t, c.RollOut(t.Context(), kind, name, mutate))
	t.Logf("%s %s rolled out %s", kind, name, what)
}

// ccmLeader is the Pod of the controller manager that holds its
// leader-election Lease, and its container's ID.
func (s *scaleEnv) ccmLeader(ctx context.Context) (*v1.Pod, string, error) {
	l, err := s.fast.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, ccmName, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder, _, _ = strings.Cut(*l.Spec.HolderIdentity, "_") // "<pod>_<uuid>"
	}
	pod, err := s.fast.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, holder, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("controller manager leader %q: %w", holder, err)
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == ccmContainer && st.ContainerID != "" && st.State.Running != nil {
			return pod, st.ContainerID, nil
		}
	}
	return nil, "", fmt.Errorf("controller manager leader %s: its container does not run", holder)
}

// ccmPid is the host pid of the leading controller manager.
func (s *scaleEnv) ccmPid(ctx context.Context) (int, error) {
	pod, id, err := s.ccmLeader(ctx)
	if err != nil {
		return 0, err
	}
	return s.c.Node(pod.Spec.NodeName).ContainerPID(ctx, id)
}

// agentPid is the host pid of the agent on the load-balancer host.
func (s *scaleEnv) agentPid(ctx context.Context) (int, error) {
	_, id, err := s.c.AgentContainer(ctx, s.lb.Name)
	if err != nil {
		return 0, err
	}
	return s.lb.ContainerPID(ctx, id)
}

// containerLogs are the kubelet's log files of every container named
// container of kube-system Pods whose name starts with pod, on every node
// (a restart adds a file; a new Pod a directory).
func (s *scaleEnv) containerLogs(pod, container string) []string {
	var out []string
	for _, n := range s.c.Nodes {
		for _, f := range n.PodLogs() {
			// <dir>/<namespace>_<pod>_<uid>/<container>/<restart>.log
			ctr := filepath.Base(filepath.Dir(f))
			podDir := filepath.Base(filepath.Dir(filepath.Dir(f)))
			if ctr == container && strings.HasPrefix(podDir, metav1.NamespaceSystem+"_"+pod) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (s *scaleEnv) ccmLogs() []string   { return s.containerLogs(ccmName, ccmContainer) }
func (s *scaleEnv) agentLogs() []string { return s.containerLogs("groundcloud-agent", agentContainr) }

// saveLogs copies the agent's and the controller manager's container logs
// to GROUNDCLOUD_BENCH_PROFILES (see saveLogs), and shows their last lines
// when the test failed.
func (s *scaleEnv) saveLogs(t *testing.T) {
	logs := map[string]string{}
	for who, files := range map[string][]string{"controller-manager": s.ccmLogs(), "agent": s.agentLogs()} {
		for i, f := range files {
			logs[fmt.Sprintf("%s-%d", who, i)] = f
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", f, tail(f, 40))
			}
		}
	}
	// The control plane's (kube-controller-manager's client throttling,
	// say) and the kube-proxies', saved only.
	for _, f := range s.c.CP.Logs() {
		logs[strings.TrimSuffix(filepath.Base(f), ".log")] = f
	}
	for i, f := range s.containerLogs("kube-proxy", "kube-proxy") {
		logs[fmt.Sprintf("kube-proxy-%d", i)] = f
	}
	saveLogs(t, logs)
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logsCount counts the lines that contain substr in a set of growing log
// files (found again at every poll, so files that appear later count
// too), from the size each had when the count was made.
type logsCount struct {
	files  func() []string
	substr string
	each   map[string]*logCount
	n      int
	at     time.Time // when n last grew
}

func newLogsCount(files func() []string, substr string) *logsCount {
	c := &logsCount{files: files, substr: substr, each: map[string]*logCount{}}
	for _, f := range files() {
		lc := &logCount{path: f, substr: substr}
		if st, err := os.Stat(f); err == nil {
			lc.off = st.Size()
		}
		c.each[f] = lc
	}
	return c
}

func (c *logsCount) poll() int {
	for _, f := range c.files() {
		lc := c.each[f]
		if lc == nil {
			lc = &logCount{path: f, substr: c.substr}
			c.each[f] = lc
		}
		before := lc.n
		if lc.poll() > before && lc.at.After(c.at) {
			c.at = lc.at
		}
	}
	n := 0
	for _, lc := range c.each {
		n += lc.n
	}
	c.n = n
	return n
}

// logCount counts the lines of a growing log file that contain substr,
// reading only what was added since the last poll.
type logCount struct {
	path, substr string
	off          int64
	rest         []byte // an unfinished last line
	n            int
	at           time.Time // when n last grew
}

func (c *logCount) poll() int {
	f, err := os.Open(c.path)
	if err != nil {
		return c.n
	}
	defer f.Close()
	if _, err := f.Seek(c.off, io.SeekStart); err != nil {
		return c.n
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return c.n
	}
	c.off += int64(len(data))
	data = append(c.rest, data...)
	end := bytes.LastIndexByte(data, '\n') + 1
	c.rest = slices.Clone(data[end:])
	if k := bytes.Count(data[:end], []byte(c.substr)); k > 0 {
		c.n += k
		c.at = time.Now()
	}
	return c.n
}

// logLines calls fn with each line of a log: a container log in the CRI
// format the kubelet writes ("<time> <stream> <P|F> <text>") by its text,
// the parts of a long line (P) joined; any other line as it is.
func logLines(r io.Reader, fn func(line string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // a first sync adds thousands
	var partial strings.Builder
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) < 4 || (f[2] != "P" && f[2] != "F") {
			fn(sc.Text())
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, f[0]); err != nil {
			fn(sc.Text())
			continue
		}
		partial.WriteString(f[3])
		if f[2] == "P" {
			continue
		}
		fn(partial.String())
		partial.Reset()
	}
	return sc.Err()
}

// agentStarted is when the running agent's process started (from its
// start time in clock ticks since boot, and the machine's uptime).
func (s *scaleEnv) agentStarted(ctx context.Context) (time.Time, error) {
	pid, err := s.agentPid(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return processStart(pid)
}

// processStart is when a process started: /proc/<pid>/stat's starttime
// (field 22, clock ticks of 10 ms since boot) against /proc/uptime.
func processStart(pid int) (time.Time, error) {
	now := time.Now()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, err
	}
	up, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, err
	}
	// Fields after the command name (which may hold spaces): starttime is
	// the 20th of them.
	fs := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	if len(fs) < 20 {
		return time.Time{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ticks, err := strconv.ParseInt(fs[19], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	uptime, err := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-time.Duration(uptime*float64(time.Second)) + time.Duration(ticks)*10*time.Millisecond), nil
}
