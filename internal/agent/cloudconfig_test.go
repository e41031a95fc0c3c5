package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/testutil"
)

// cloudConf writes a cloud-config and the password files it names (by
// their base name, in the same directory) and returns its path.
func cloudConf(t *testing.T, conf string, passwords map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, pw := range passwords {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "cloud.conf")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(conf, "$DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func peerSection(name, addr, extra string) string {
	return "[BGPPeer \"" + name + "\"]\naddress = " + addr + "\nasn = 64512\nlocal-asn = 64513\n" + extra
}

const globalConf = "[Global]\nregion = home\n"

// TestLoadCloudConfig: the agent goes on with the parts of the cloud-config
// it can use (issue 31, item 8). A problem in a section it does not read,
// or in one peer (its section or its password file), used to stop it.
func TestLoadCloudConfig(t *testing.T) {
	rack := labels.Set{"node-restriction.kubernetes.io/rack": "a"}
	tests := []struct {
		name      string
		conf      string
		passwords map[string]string
		peers     []string // name:password
		leftOut   []string
		problems  []string // a part of each
		routes    bool     // WaitForNodeRouters
	}{
		{
			name:  "sound",
			conf:  globalConf + peerSection("tor", "10.0.0.1", "password-file = $DIR/tor\n") + "[Routes]\n",
			peers: []string{"tor:s3cret"}, passwords: map[string]string{"tor": "s3cret\n"}, routes: true,
		},
		{
			name:     "a problem in a machine",
			conf:     globalConf + "[Machine \"web-1\"]\nzone =\n" + peerSection("tor", "10.0.0.1", "") + "[Routes]\n",
			peers:    []string{"tor:"},
			problems: []string{`cloud.conf:4: [Machine "web-1"] zone: must not be empty`}, routes: true,
		},
		{
			name:     "no [Global]",
			conf:     peerSection("tor", "10.0.0.1", ""),
			peers:    []string{"tor:"},
			problems: []string{"no [Global] section"},
		},
		{
			name:     "a peer's missing password file",
			conf:     globalConf + peerSection("tor", "10.0.0.1", "password-file = $DIR/tor\n") + peerSection("spine", "10.0.0.2", ""),
			peers:    []string{"spine:"},
			leftOut:  []string{"tor"},
			problems: []string{`[BGPPeer "tor"] password-file: open `},
		},
		{
			name:      "a peer's empty password file",
			conf:      globalConf + peerSection("tor", "10.0.0.1", "password-file = $DIR/tor\n") + peerSection("spine", "10.0.0.2", ""),
			passwords: map[string]string{"tor": "\n"},
			peers:     []string{"spine:"},
			leftOut:   []string{"tor"},
			problems:  []string{`[BGPPeer "tor"] password-file ` + "$DIR/tor is empty"},
		},
		{
			name:  "the missing password file of a peer of other hosts",
			conf:  globalConf + peerSection("tor-b", "10.0.0.1", "password-file = $DIR/tor-b\nhosts = node-restriction.kubernetes.io/rack=b\n") + peerSection("spine", "10.0.0.2", ""),
			peers: []string{"spine:"},
		},
		{
			name:     "a peer with a problem",
			conf:     globalConf + peerSection("tor", "10.0.0.1", "hold-time = 1s\n") + peerSection("spine", "10.0.0.2", ""),
			peers:    []string{"spine:"},
			leftOut:  []string{"tor"},
			problems: []string{`[BGPPeer "tor"] hold-time: "1s" is below 3s`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := cloudConf(t, tc.conf, tc.passwords)
			cc, err := loadCloudConfig(path, func() (labels.Set, error) { return rack, nil })
			if err != nil {
				t.Fatalf("loadCloudConfig: %v", err)
			}
			var peers []string
			for _, p := range cc.Peers {
				peers = append(peers, p.Name+":"+p.Password)
			}
			if diff := cmp.Diff(tc.peers, peers); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.leftOut, cc.LeftOut); diff != "" {
				t.Errorf("left out (-want +got):\n%s", diff)
			}
			if len(cc.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d", cc.Problems, len(tc.problems))
			}
			for i, want := range tc.problems {
				if want = strings.ReplaceAll(want, "$DIR", filepath.Dir(path)); !strings.Contains(cc.Problems[i].Error(), want) {
					t.Errorf("problem %d: %q, want it to contain %q", i, cc.Problems[i], want)
				}
			}
			if got := cc.Routes.WaitForNodeRouters(); got != tc.routes {
				t.Errorf("wait for node routers: %v, want %v", got, tc.routes)
			}
		})
	}
}

// A file without a usable peer needs no labels: the agent does not wait
// for the apiserver to choose among no peers.
func TestLoadCloudConfigWithoutPeersNeedsNoLabels(t *testing.T) {
	path := cloudConf(t, globalConf+"[BGPPeer \"tor\"]\naddress = 10.0.0.1\n", nil)
	cc, err := loadCloudConfig(path, func() (labels.Set, error) { return nil, errors.New("no labels") })
	if err != nil {
		t.Fatalf("loadCloudConfig: %v", err)
	}
	if cc.PeerSections != 1 || len(cc.LeftOut) != 1 || len(cc.Peers) != 0 {
		t.Errorf("peer sections %d, left out %v, peers %v; want 1, [tor], none", cc.PeerSections, cc.LeftOut, cc.Peers)
	}
}

func TestLoadCloudConfigUnreadable(t *testing.T) {
	_, err := loadCloudConfig(filepath.Join(t.TempDir(), "missing.conf"), func() (labels.Set, error) { return nil, nil })
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("loadCloudConfig: %v, want a missing file", err)
	}
}

// The agent's start with a cloud-config that has problems: it goes on,
// and says what is wrong in an Event on its Node and in metrics.
func TestCloudConfigReportsProblems(t *testing.T) {
	RegisterMetrics()
	path := cloudConf(t, globalConf+"[Machine \"web-1\"]\nzone =\n"+
		peerSection("tor", "10.0.0.1", "password-file = $DIR/tor\n")+peerSection("spine", "10.0.0.2", ""), nil)
	o := NewOptions()
	o.Host, o.BGP.CloudConfig, o.BGP.HostLabels = "lb-1", path, "node-restriction.kubernetes.io/rack=a"
	rec := record.NewFakeRecorder(4)
	cc, err := o.cloudConfig(t.Context(), nil, rec)
	if err != nil {
		t.Fatalf("cloudConfig: %v", err)
	}
	if len(cc.Peers) != 1 || cc.Peers[0].Name != "spine" {
		t.Errorf("peers %v, want spine", cc.Peers)
	}
	close(rec.Events)
	var events []string
	for e := range rec.Events {
		events = append(events, e)
	}
	want := "Warning CloudConfigProblems The cloud-config " + path + " has 2 problem(s), all in the agent's log; " +
		"the agent goes on with the parts it can use, without the BGP peers tor. The first: " + path + `:4: [Machine "web-1"] zone: must not be empty`
	if diff := cmp.Diff([]string{want}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, m := range []struct {
		name string
		got  func() (float64, error)
		want float64
	}{
		{"cloud_config_problems", func() (float64, error) { return testutil.GetGaugeMetricValue(cloudConfigProblems) }, 2},
		{"bgp_peers_left_out", func() (float64, error) { return testutil.GetGaugeMetricValue(bgpPeersLeftOut) }, 1},
	} {
		if got, err := m.got(); err != nil || got != m.want {
			t.Errorf("groundcloud_agent_%s = %v (%v), want %v", m.name, got, err, m.want)
		}
	}
}
