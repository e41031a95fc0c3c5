package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/lbapi"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/availability"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// holdDown is the agents' --ownership-hold-down in these tests: short, so
// that a returning host takes its share back soon.
const holdDown = 2 * time.Second

// haEnv is the sandbox with several LB hosts whose agents share the
// virtual IPs over memberlist (gossip keys that do not match; the failover
// scenarios run on the real cluster, test/cluster).
type haEnv struct {
	*lbEnv
	holders *availability.Holders
}

// startHAEnvKeys starts lbHosts agents with --vip-ownership=memberlist.
// With seeds, every agent is given every LB host's address; without, they
// find each other in LoadBalancer status only. With distinctKeys each
// agent has a gossip key of its own, so that none can gossip with another.
func startHAEnvKeys(t *testing.T, lbHosts int, seeds, distinctKeys bool) *haEnv {
	t.Helper()
	dir := t.TempDir()
	keyFiles := make([]string, lbHosts)
	for i := range keyFiles {
		keyFiles[i] = filepath.Join(dir, "gossip.key")
		if distinctKeys {
			keyFiles[i] = filepath.Join(dir, fmt.Sprintf("gossip-%d.key", i))
		}
		if i == 0 || distinctKeys {
			writeFile(t, keyFiles[i], base64.StdEncoding.EncodeToString(randomBytes(t, 32))+"\n")
		}
	}
	return startHAEnvArgs(t, dir, lbHosts, func(e *apionly.Env, i int) []string {
		args := []string{
			"--vip-ownership=memberlist",
			"--gossip-key-file=" + keyFiles[i],
			"--ownership-hold-down=" + holdDown.String(),
		}
		if seeds {
			var s []string
			for _, h := range e.LBs {
				s = append(s, h.Addr4.String())
			}
			args = append(args, "--gossip-seeds="+strings.Join(s, ","))
		}
		return args
	})
}

// startLoneEnv starts one LB host whose agent holds every address
// (--vip-ownership=all, the default), in the same sandbox as startHAEnvKeys.
func startLoneEnv(t *testing.T) *haEnv {
	t.Helper()
	return startHAEnvArgs(t, t.TempDir(), 1, func(*apionly.Env, int) []string { return []string{"--vip-ownership=all"} })
}

// startHAEnvArgs starts lbHosts agents with agentArgs (and their metrics
// on 127.0.0.1:10263 of their host) and watches which holds which address.
func startHAEnvArgs(t *testing.T, dir string, lbHosts int, agentArgs func(e *apionly.Env, i int) []string) *haEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for p := firstNodePort; p < firstNodePort+nodePorts; p++ {
		ports = append(ports, uint16(p))
	}
	e, err := apionly.Start(t.Context(), apionly.Options{
		Topology: netlab.Topology{LBHosts: lbHosts, Clients: []string{"client"}},
		Dir:      dir,
		ToolsDir: tools,
		Binaries: apionly.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		NodeSim:  apionly.NodeSim{TCPPorts: ports, HealthPorts: []uint16{healthNodePort}},
		AgentArgs: func(e *apionly.Env, i int) []string {
			return append(agentArgs(e, i), "--metrics-bind-address=127.0.0.1:10263")
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	holders, err := availability.WatchHolders(e.LBs, 20*time.Millisecond)
	if err != nil {
		_ = e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		holders.Stop()
		if t.Failed() {
			t.Logf("last lines of the controller manager:\n%s", controlplane.LogTail(e.CCMLog(), 40))
			for i, h := range e.LBs {
				t.Logf("last lines of the agent on %s:\n%s", h.Name, controlplane.LogTail(e.Agent(i).LogPath, 80))
			}
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	dyn, err := dynamic.NewForConfig(e.CP.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &haEnv{
		lbEnv: &lbEnv{
			Env: e, client: e.Client, cp: e.CP, dyn: dyn, lb: e.LBs[0], nodes: e.Nodes,
			inside: e.Clients["client"], stateDir: e.StateDir, nextPort: firstNodePort,
		},
		holders: holders,
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// createServices creates n services "<prefix>-<i>" on port 80 and returns
// their IPv4 addresses, once each is held by exactly one host.
func (env *haEnv) createServices(t *testing.T, prefix string, n int) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		env.create(t, newService(name, withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
		out = append(out, env.addresses(t, name, 1)[0])
	}
	for _, v := range out {
		if _, err := env.holders.WaitHeld(t.Context(), v, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// owners returns the host holding each address (one each, or it fails).
func (env *haEnv) owners(t *testing.T, vips []netip.Addr) map[netip.Addr]string {
	t.Helper()
	out := map[netip.Addr]string{}
	for _, v := range vips {
		h := env.holders.Now(v)
		if len(h) != 1 {
			t.Fatalf("%s held by %v, want exactly one host", v, h)
		}
		out[v] = h[0]
	}
	return out
}

// settle waits until every address is held by one host and that has not
// changed for a while.
func (env *haEnv) settle(t *testing.T, vips []netip.Addr, quiet time.Duration) map[netip.Addr]string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		start := time.Now()
		stable := true
		for _, v := range vips {
			ch := env.holders.Changes(v, start.Add(-quiet))
			if len(ch) != 1 || len(ch[0].Hosts) != 1 {
				stable = false
			}
		}
		if stable {
			return env.owners(t, vips)
		}
		if time.Now().After(deadline) {
			t.Fatalf("addresses not settled within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// statusHost returns the host LoadBalancer name's status says holds vip.
func (env *haEnv) statusHost(t *testing.T, name string, vip netip.Addr) (string, *v1alpha1.LoadBalancer) {
	t.Helper()
	u, err := env.dyn.Resource(lbapi.Resource).Namespace("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := lbapi.Type.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range lb.Status.Addresses {
		if a.Address == vip.String() {
			return a.Host, lb
		}
	}
	return "", lb
}

// metric reads one sample from the /metrics of LB host i's agent (0 when
// absent).
func (env *haEnv) metric(t *testing.T, i int, series string) float64 {
	t.Helper()
	resp, err := env.LBs[i].HTTPClient().Get("http://127.0.0.1:10263/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			if _, err := fmt.Sscan(strings.TrimPrefix(line, series+" "), &v); err == nil {
				return v
			}
		}
	}
	return 0
}
