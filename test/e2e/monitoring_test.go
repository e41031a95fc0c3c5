package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/apionly"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
	"github.com/groundcloud/groundcloud/test/framework/metricscheck"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestMonitoringWatchesExposedMetrics: every metric, and every label of
// it, that the alerting rules and the dashboard of deploy/monitoring use
// is on the /metrics of the real controller manager or of a real agent,
// after a scenario that gives each metric something to say: two
// load-balancer hosts sharing addresses over memberlist, a Service that
// carries traffic, one whose health check no node answers, a BGP router
// that does not answer, and a broken cloud-config. The gauges the alerts
// read say what happened.
func TestMonitoringWatchesExposedMetrics(t *testing.T) {
	report := promcheckReport(t)
	env, ccmPort := startMonitoredEnv(t)
	env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	env.create(t, newService("nobody-home", withPort(v1.ProtocolTCP, 81, env.nodePort(t)), withLocalTraffic(32099)))
	env.addresses(t, "web", 1)
	env.addresses(t, "nobody-home", 1)

	agents := []func() string{func() string { return env.agentMetrics(t, 0) }, func() string { return env.agentMetrics(t, 1) }}
	ccm := func() string { return ccmMetrics(t, env.CP.RESTConfig().BearerToken, ccmPort) }
	eventually(t, "agents that hold both addresses, see nobody-home without a healthy backend and no BGP session", func() bool {
		held := 0.0
		for _, a := range agents {
			page := a()
			if sample(page, "groundcloud_agent_virtual_ips") != 2 || sample(page, "groundcloud_agent_programmed") != 1 ||
				sample(page, `groundcloud_agent_no_healthy_backends{loadbalancer="default/nobody-home"}`) != 1 ||
				sample(page, `groundcloud_membership_members{state="Ready"}`) != 2 ||
				sample(page, `groundcloud_agent_bgp_session_up{peer="silent"}`) != 0 {
				return false
			}
			held += sample(page, "groundcloud_agent_virtual_ips_held")
		}
		return held == 2
	})
	eventually(t, "the controller manager's pool usage", func() bool {
		return sample(ccm(), `groundcloud_pool_addresses{family="IPv4",kind="used",pool="default"}`) == 2
	})

	// A broken cloud-config is refused; the alert's gauge says so until it
	// is repaired.
	good, err := os.ReadFile(env.CloudConfig)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, env.CloudConfig, string(good)+"\n[Pool \"broken\"]\nbogus = 1\n")
	eventually(t, "groundcloud_cloud_config_last_reload_successful 0", func() bool {
		return sample(ccm(), "groundcloud_cloud_config_last_reload_successful") == 0
	})
	exposed := metricscheck.Exposed{}
	for _, page := range []string{ccm(), agents[0](), agents[1]()} {
		if err := exposed.ParseExposition(strings.NewReader(page)); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, env.CloudConfig, string(good))
	eventually(t, "groundcloud_cloud_config_last_reload_successful 1", func() bool {
		return sample(ccm(), "groundcloud_cloud_config_last_reload_successful") == 1
	})

	for _, p := range metricscheck.Problems(report, exposed) {
		t.Error(p)
	}
	t.Logf("%d expressions of deploy/monitoring checked against %d exposed series", len(report.Expressions), len(exposed))

	// The traffic counters on /metrics follow what a client sends: n
	// connections through a proxy Service are n new connections, summed
	// over the agents and nodes, and at least three packets each.
	const n = 20
	env.create(t, newService("counted", withPort(v1.ProtocolTCP, 80, env.nodePort(t)),
		func(s *v1.Service) { s.Annotations = map[string]string{annotation.Forwarding: "proxy"} }))
	vip := env.addresses(t, "counted", 1)[0]
	got, err := spread(t.Context(), env.inside, netip.AddrPortFrom(vip, 80), n)
	if err != nil {
		t.Fatalf("connections to %s: %v (answers %v)", vip, err, got)
	}
	counted := `namespace="default"`
	var conns, packets float64
	eventually(t, fmt.Sprintf("%d new connections of default/counted on the agents' /metrics", n), func() bool {
		conns, packets = 0, 0
		for _, a := range agents {
			page := a()
			conns += sumSeries(page, "groundcloud_agent_vip_new_connections_total", counted, `service="counted"`)
			packets += sumSeries(page, "groundcloud_agent_vip_packets_total", counted, `service="counted"`)
		}
		return conns == n
	})
	if packets < 3*n {
		t.Errorf("%v packets counted for %d connections of default/counted, want at least %d", packets, n, 3*n)
	}
	t.Logf("default/counted: %v new connections, %v packets for %d connections (answers %v)", conns, packets, n, got)
}

// sumSeries adds the values of the series of metric on a /metrics page
// whose labels contain every one of want.
func sumSeries(page, metric string, want ...string) float64 {
	var sum float64
	for _, line := range strings.Split(page, "\n") {
		labels, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(labels, "} ")
		if !ok || slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(labels, w) }) {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += f
		}
	}
	return sum
}

// promcheckReport runs promcheck (Prometheus' own rule and PromQL parsers)
// on deploy/monitoring's rules and dashboard.
func promcheckReport(t *testing.T) metricscheck.Report {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd, kube-apiserver, our binaries and network namespaces")
	}
	bin, err := controlplane.ModuleTool(t.Context(), controlplane.ToolPromcheck)
	if err != nil {
		t.Fatal(err)
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "monitoring")
	cmd := exec.CommandContext(t.Context(), bin,
		"-rules", filepath.Join(dir, "groundcloud.rules.yaml"),
		"-dashboard", filepath.Join(dir, "groundcloud-dashboard.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("promcheck: %v\n%s", err, stderr.String())
	}
	report, err := metricscheck.ReadReport(&stdout)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Expressions) == 0 {
		t.Fatal("promcheck found no expressions")
	}
	return report
}

// startMonitoredEnv starts the sandbox with two load-balancer hosts whose
// agents share the addresses over memberlist, have a BGP peer "silent"
// (the first node, where nothing listens on port 179) and serve /metrics
// on 127.0.0.1:10263 of their host, and a controller manager serving
// /metrics on the returned port of this machine's loopback.
func startMonitoredEnv(t *testing.T) (*lbEnv, int) {
	t.Helper()
	tools, err := controlplane.ToolsDir(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "gossip.key")
	writeFile(t, keyFile, base64.StdEncoding.EncodeToString(randomBytes(t, 32))+"\n")
	agentConfig := filepath.Join(dir, "agent-cloud.conf")
	ccmPort := freePort(t)
	var ports []uint16
	for p := firstNodePort; p < firstNodePort+nodePorts; p++ {
		ports = append(ports, uint16(p))
	}
	e, err := apionly.Start(t.Context(), apionly.Options{
		Topology:     netlab.Topology{LBHosts: 2},
		Dir:          dir,
		ToolsDir:     tools,
		Binaries:     apionly.Binaries{ControllerManager: ccmBinary, Agent: agentBinary, NodeSim: nodesimBinary},
		NodeSim:      apionly.NodeSim{TCPPorts: ports, HealthPorts: []uint16{healthNodePort}},
		ExtraCCMArgs: []string{"--secure-port=" + strconv.Itoa(ccmPort)},
		AgentArgs: func(e *apionly.Env, i int) []string {
			var seeds []string
			for _, h := range e.LBs {
				seeds = append(seeds, h.Addr4.String())
			}
			// The agents' cloud-config, for its BGP peer: the first node
			// refuses the session's connections.
			peer := fmt.Sprintf("[Global]\nregion = lab\n\n[BGPPeer \"silent\"]\naddress = %s\nasn = 64512\nlocal-asn = 64513\n", e.Nodes[0].Addr4)
			if err := os.WriteFile(agentConfig, []byte(peer), 0o644); err != nil {
				t.Error(err) // the agent, without its file, does not start
			}
			return []string{
				"--cloud-config=" + agentConfig,
				"--vip-ownership=memberlist",
				"--gossip-key-file=" + keyFile,
				"--gossip-seeds=" + strings.Join(seeds, ","),
				"--ownership-hold-down=" + holdDown.String(),
				"--metrics-bind-address=127.0.0.1:10263",
				// The dashboard's per-node panels read the per-node counters.
				"--traffic-counters=node",
			}
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last lines of the controller manager:\n%s", controlplane.LogTail(e.CCMLog(), 40))
			for i, h := range e.LBs {
				t.Logf("last lines of the agent on %s:\n%s", h.Name, controlplane.LogTail(e.Agent(i).LogPath, 40))
			}
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return &lbEnv{Env: e, client: e.Client, cp: e.CP, lb: e.LBs[0], nodes: e.Nodes, inside: e.Clients["client"], stateDir: e.StateDir, nextPort: firstNodePort}, ccmPort
}

// agentMetrics is the /metrics page of LB host i's agent ("" when it does
// not answer).
func (env *lbEnv) agentMetrics(t *testing.T, i int) string {
	t.Helper()
	return get(env.LBs[i].HTTPClient(), "http://127.0.0.1:10263/metrics", "")
}

// ccmMetrics is the controller manager's /metrics page, read with the
// admin's token on its secure port (its serving certificate is
// self-signed); "" when it does not answer.
func ccmMetrics(t *testing.T, token string, port int) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return get(c, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), token)
}

func get(c *http.Client, url, token string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return ""
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(body)
}

// sample is the value of one series ("name" or `name{labels}` as the page
// prints it) on a /metrics page, or -1 when it is not there.
func sample(page, series string) float64 {
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}
