package config

import (
	"testing"
)

// TestHostSelectorKeys: a `hosts` selector may select only on label keys
// that the NodeRestriction admission plugin keeps kubelets from setting
// (under node-restriction.kubernetes.io/), unless [Global] says
// allow-node-set-labels = true; every other key is refused on its line.
func TestHostSelectorKeys(t *testing.T) {
	const global = "[Global]\nregion = eu\n" // lines 1-2
	const peer = "address = 10.0.0.1\nasn = 1\nlocal-asn = 2\n"
	tests := []struct {
		name string
		in   string
		want []problem // none: accepted
	}{
		{
			name: "keys under node-restriction.kubernetes.io/ and a domain's own form of it",
			in: global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n" +
				"hosts = node-restriction.kubernetes.io/edge=true,!node-restriction.kubernetes.io/drain\n" +
				"[BGPPeer \"r\"]\n" + peer + "hosts = example.net.node-restriction.kubernetes.io/rack in (a,b)\n",
		},
		{
			name: "no selector, or an empty one",
			in:   global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\nhosts =\n[Pool \"b\"]\naddresses = 192.0.2.16/28\n",
		},
		{
			name: "keys a kubelet may set, in a pool and a peer, each on its line",
			in: global + "[Pool \"edge\"]\naddresses = 192.0.2.0/28\n" +
				"hosts = example.net/edge=true\n" + // 5
				"[BGPPeer \"r\"]\n" + peer +
				"hosts = node-restriction.kubernetes.io/rack=a,kubernetes.io/hostname in (lb-1,lb-2),!example.net/drain\n", // 10
			want: []problem{
				{5, `cloud.conf:5: [Pool "edge"] hosts: label key example.net/edge is not under node-restriction.kubernetes.io/`},
				{10, `cloud.conf:10: [BGPPeer "r"] hosts: label keys example.net/drain, kubernetes.io/hostname are not under node-restriction.kubernetes.io/`},
			},
		},
		{
			name: "the error says what to do",
			in:   global + "[Pool \"edge\"]\naddresses = 192.0.2.0/28\nhosts = example.net/edge\n",
			want: []problem{{5, "label the hosts with a key under node-restriction.kubernetes.io/ and select on it, or set allow-node-set-labels = true in [Global]"}},
		},
		{
			name: "a key that looks like one but is not in the namespace",
			in:   global + "[Pool \"edge\"]\naddresses = 192.0.2.0/28\nhosts = node-restriction.kubernetes.io.example.net/edge\n",
			want: []problem{{5, "label key node-restriction.kubernetes.io.example.net/edge is not under node-restriction.kubernetes.io/"}},
		},
		{
			name: "allow-node-set-labels accepts any key, wherever [Global] is",
			in: "[Pool \"edge\"]\naddresses = 192.0.2.0/28\nhosts = example.net/edge=true\n" +
				"[BGPPeer \"r\"]\n" + peer + "hosts = rack=a\n" +
				global + "allow-node-set-labels = true\n",
		},
		{
			name: "a selector of a section that is not kept is not checked twice",
			in: global + "[Pool \"a\"]\naddresses = 192.0.2.0/28\n" +
				"[Pool \"a\"]\naddresses = 192.0.2.16/28\nhosts = example.net/edge\n", // 5-7
			want: []problem{{5, "section given twice"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("cloud.conf", []byte(tc.in))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if cfg != nil {
				t.Errorf("Parse returned a Config with error %v", err)
			}
			checkProblems(t, err, tc.want)
		})
	}
}
