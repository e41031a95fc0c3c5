package metricscheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The healthy clusters of testdata/alerts, one directory each: two agents
// (lb-1, lb-2) and the controller manager, as their /metrics pages read
// when every LoadBalancer is Ready. l2: three addresses of an L2 pool held
// by the two hosts (2 + 1). bgp: three addresses of a BGP pool advertised
// by both hosts to the router frr, none held. mixed: both pools, two L2
// addresses (one each) and three advertised.
var clusterKinds = []string{"l2", "bgp", "mixed"}

const (
	agentJob = "groundcloud-agent"
	ccmJob   = "groundcloud-controller-manager"
)

// edit changes one target's page of a healthy cluster: it replaces old (a
// whole line; the test fails if the page lacks it) by new, or, with old
// empty, appends new.
type edit struct {
	instance, old, new string
}

// fault is what a cluster's pages read when the fault an alert names
// happens: the alerts that must fire then, the first being the one it
// stands for.
type fault struct {
	name  string
	kinds []string
	edits []edit
	fire  []string
}

const (
	lb1 = "lb-1:10263"
	lb2 = "lb-2:10263"
	ccm = "groundcloud-controller-manager:10258"
)

var noHealthyBackend = `# HELP groundcloud_agent_no_healthy_backends [ALPHA] 1 for each LoadBalancer (namespace/name) none of whose backends is healthy: its connections are refused. LoadBalancers with a healthy backend are not listed.
# TYPE groundcloud_agent_no_healthy_backends gauge
groundcloud_agent_no_healthy_backends{loadbalancer="default/web"} 1`

var faults = []fault{
	{
		name:  "pool nearly full",
		kinds: []string{"l2"},
		edits: []edit{{ccm, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="l2"} 3`, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="l2"} 15`}},
		fire:  []string{"GroundcloudPoolNearlyExhausted"},
	},
	{
		name:  "pool nearly full",
		kinds: []string{"bgp", "mixed"},
		edits: []edit{{ccm, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="bgp"} 3`, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="bgp"} 15`}},
		fire:  []string{"GroundcloudPoolNearlyExhausted"},
	},
	{
		// A full pool is nearly full too.
		name:  "pool full",
		kinds: []string{"bgp", "mixed"},
		edits: []edit{{ccm, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="bgp"} 3`, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="bgp"} 16`}},
		fire:  []string{"GroundcloudPoolExhausted", "GroundcloudPoolNearlyExhausted"},
	},
	{
		name:  "pool full",
		kinds: []string{"l2"},
		edits: []edit{{ccm, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="l2"} 3`, `groundcloud_pool_addresses{family="IPv4",kind="used",pool="l2"} 16`}},
		fire:  []string{"GroundcloudPoolExhausted", "GroundcloudPoolNearlyExhausted"},
	},
	{
		name:  "an address held by no host",
		kinds: []string{"l2"},
		edits: []edit{{lb1, "groundcloud_agent_virtual_ips_held 2", "groundcloud_agent_virtual_ips_held 1"}},
		fire:  []string{"GroundcloudAddressHeldByNoHost"},
	},
	{
		name:  "an address held by no host",
		kinds: []string{"mixed"},
		edits: []edit{{lb2, "groundcloud_agent_virtual_ips_held 1", "groundcloud_agent_virtual_ips_held 0"}},
		fire:  []string{"GroundcloudAddressHeldByNoHost"},
	},
	{
		// A new address the printer answers for is held by no host.
		name:  "address in use",
		kinds: []string{"l2", "mixed"},
		edits: []edit{
			{lb2, "groundcloud_membership_addresses_in_use 0", "groundcloud_membership_addresses_in_use 1"},
			{lb2, "groundcloud_agent_virtual_ips_held 1", "groundcloud_agent_virtual_ips_held 0"},
		},
		fire: []string{"GroundcloudAddressInUse", "GroundcloudAddressHeldByNoHost"},
	},
	{
		name:  "split brain",
		kinds: clusterKinds,
		edits: []edit{
			{lb2, "groundcloud_membership_split_brains 0", "groundcloud_membership_split_brains 1"},
			{lb2, `groundcloud_membership_split_brains_total{action="Defend"} 0`, `groundcloud_membership_split_brains_total{action="Defend"} 1`},
		},
		fire: []string{"GroundcloudSplitBrain"},
	},
	{
		// The other host carries lb-1's share.
		name:  "host not programmed",
		kinds: []string{"l2"},
		edits: []edit{
			{lb1, "groundcloud_agent_programmed 1", "groundcloud_agent_programmed 0"},
			{lb1, "groundcloud_agent_sync_failures_total 0", "groundcloud_agent_sync_failures_total 4"},
			{lb1, "groundcloud_agent_virtual_ips_held 2", "groundcloud_agent_virtual_ips_held 0"},
			{lb2, "groundcloud_agent_virtual_ips_held 1", "groundcloud_agent_virtual_ips_held 3"},
		},
		fire: []string{"GroundcloudHostNotProgrammed"},
	},
	{
		name:  "host not programmed",
		kinds: []string{"bgp", "mixed"},
		edits: []edit{
			{lb1, "groundcloud_agent_programmed 1", "groundcloud_agent_programmed 0"},
			{lb1, "groundcloud_agent_sync_failures_total 0", "groundcloud_agent_sync_failures_total 4"},
		},
		fire: []string{"GroundcloudHostNotProgrammed"},
	},
	{
		name:  "no healthy backend",
		kinds: clusterKinds,
		edits: []edit{{lb1, "", noHealthyBackend}, {lb2, "", noHealthyBackend}},
		fire:  []string{"GroundcloudLoadBalancerNoHealthyBackend"},
	},
	{
		name:  "cloud-config refused",
		kinds: clusterKinds,
		edits: []edit{
			{ccm, "groundcloud_cloud_config_last_reload_successful 1", "groundcloud_cloud_config_last_reload_successful 0"},
			{ccm, `groundcloud_cloud_config_reloads_total{result="invalid"} 0`, `groundcloud_cloud_config_reloads_total{result="invalid"} 1`},
		},
		fire: []string{"GroundcloudCloudConfigReloadFailing"},
	},
	{
		// An agent started with a typo in a [Machine] section and a BGP
		// password file it cannot read: it goes on without that peer.
		name:  "agent cloud-config problems",
		kinds: clusterKinds,
		edits: []edit{
			{lb1, "groundcloud_agent_cloud_config_problems 0", "groundcloud_agent_cloud_config_problems 2"},
			{lb1, "groundcloud_agent_bgp_peers_left_out 0", "groundcloud_agent_bgp_peers_left_out 1"},
		},
		fire: []string{"GroundcloudAgentCloudConfigProblems"},
	},
	{
		// Gossip cut: each host sees only itself.
		name:  "gossip members missing",
		kinds: clusterKinds,
		edits: []edit{
			{lb1, `groundcloud_membership_members{state="Ready"} 2`, `groundcloud_membership_members{state="Ready"} 1`},
			{lb2, `groundcloud_membership_members{state="Ready"} 2`, `groundcloud_membership_members{state="Ready"} 1`},
		},
		fire: []string{"GroundcloudGossipMembersMissing"},
	},
	{
		// A host with another key (not scraped) gossips to lb-2.
		name:  "gossip key mismatch",
		kinds: clusterKinds,
		edits: []edit{{lb2, `groundcloud_membership_gossip_errors_total{reason="Decrypt"} 0`, `groundcloud_membership_gossip_errors_total{reason="Decrypt"} 7`}},
		fire:  []string{"GroundcloudGossipKeyMismatch"},
	},
	{
		name:  "BGP session down",
		kinds: []string{"bgp", "mixed"},
		edits: []edit{
			{lb1, `groundcloud_agent_bgp_session_up{peer="frr"} 1`, `groundcloud_agent_bgp_session_up{peer="frr"} 0`},
			{lb1, `groundcloud_agent_bgp_announced_routes{family="ipv4"} 3`, `groundcloud_agent_bgp_announced_routes{family="ipv4"} 0`},
		},
		fire: []string{"GroundcloudBGPSessionDown"},
	},
}

// TestAlertsSilentOnHealthyClusters: no alert of deploy/monitoring fires on
// a healthy L2, BGP or mixed cluster (two scrapes a minute apart, so that
// the expressions over counters see them).
func TestAlertsSilentOnHealthyClusters(t *testing.T) {
	bin, rulesFile := alertTools(t)
	for _, kind := range clusterKinds {
		t.Run(kind, func(t *testing.T) {
			healthy := healthyCluster(t, kind)
			ev, err := EvalAlerts(t.Context(), bin, rulesFile, healthy, healthy)
			if err != nil {
				t.Fatal(err)
			}
			if len(ev.Evaluated) == 0 {
				t.Fatal("no alerting rule evaluated")
			}
			for _, f := range ev.Firing {
				t.Errorf("fires on a healthy cluster: %s", f)
			}
		})
	}
}

// TestAlertsFireOnTheirFault: each alert of deploy/monitoring fires on the
// fault it names, on every kind of cluster where that fault can happen,
// and no other alert does (but those the fault implies, listed). Every
// alert must have a fault here.
func TestAlertsFireOnTheirFault(t *testing.T) {
	bin, rulesFile := alertTools(t)
	covered := map[string][]string{}
	var evaluated []string
	for _, f := range faults {
		for _, kind := range f.kinds {
			covered[f.fire[0]] = append(covered[f.fire[0]], kind)
			t.Run(f.name+"/"+kind, func(t *testing.T) {
				healthy := healthyCluster(t, kind)
				ev, err := EvalAlerts(t.Context(), bin, rulesFile, applyEdits(t, healthy, f.edits), healthy)
				if err != nil {
					t.Fatal(err)
				}
				evaluated = ev.Evaluated
				want := slices.Sorted(slices.Values(f.fire))
				if diff := cmp.Diff(want, ev.Alerts()); diff != "" {
					t.Errorf("firing alerts (-want +got):\n%s", diff)
					for _, fi := range ev.Firing {
						t.Log(fi)
					}
				}
			})
		}
	}
	if len(evaluated) == 0 {
		t.Fatal("no alerting rule evaluated")
	}
	for _, a := range evaluated {
		if len(covered[a]) == 0 {
			t.Errorf("alert %s has no fault in TestAlertsFireOnTheirFault", a)
		}
	}
	for a := range covered {
		if !slices.Contains(evaluated, a) {
			t.Errorf("fault for %s, an alert the rules do not have", a)
		}
	}
}

// alertTools returns the promcheck binary and deploy/monitoring's rules.
func alertTools(t *testing.T) (string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs hack/tools/promcheck; skipped with -short")
	}
	bin, rules, err := AlertTools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return bin, rules
}

// healthyCluster reads testdata/alerts/<kind>.
func healthyCluster(t *testing.T, kind string) []Target {
	t.Helper()
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "alerts", kind, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return []Target{
		{Job: agentJob, Instance: lb1, Page: read("agent-lb-1.txt")},
		{Job: agentJob, Instance: lb2, Page: read("agent-lb-2.txt")},
		{Job: ccmJob, Instance: ccm, Page: read("controller-manager.txt")},
	}
}

// applyEdits returns a copy of targets with the edits made.
func applyEdits(t *testing.T, targets []Target, edits []edit) []Target {
	t.Helper()
	out := slices.Clone(targets)
	for _, e := range edits {
		i := slices.IndexFunc(out, func(tg Target) bool { return tg.Instance == e.instance })
		if i < 0 {
			t.Fatalf("no target %s", e.instance)
		}
		page := out[i].Page
		switch {
		case e.old == "":
			page += e.new + "\n"
		case strings.Contains("\n"+page, "\n"+e.old+"\n"):
			page = strings.TrimPrefix(strings.Replace("\n"+page, "\n"+e.old+"\n", "\n"+e.new+"\n", 1), "\n")
		default:
			t.Fatalf("%s's page has no line %q", e.instance, e.old)
		}
		out[i].Page = page
	}
	return out
}
