package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClusterHealthCheck(t *testing.T) {
	for _, tc := range []struct {
		name, global string
		want         ClusterHealthCheck
		wantErr      string
	}{
		{name: "default: kube-proxy", want: defaultHealthCheck},
		{name: "another port and path", global: "cluster-health-check-port = 9879\ncluster-health-check-path = /healthz/ready\n",
			want: ClusterHealthCheck{Kind: HealthCheckHTTP, Port: 9879, Path: "/healthz/ready"}},
		{name: "TCP to the node port", global: "cluster-health-check = TCP-Node-Port\n",
			want: ClusterHealthCheck{Kind: HealthCheckTCPNodePort, Port: 10256, Path: "/healthz"}},
		{name: "unknown kind", global: "cluster-health-check = grpc\n", wantErr: `:3: `},
		{name: "port 0", global: "cluster-health-check-port = 0\n", wantErr: `"0" is not a port`},
		{name: "port too big", global: "cluster-health-check-port = 65536\n", wantErr: `"65536" is not a port`},
		{name: "relative path", global: "cluster-health-check-path = healthz\n", wantErr: `"healthz" is not an HTTP path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("test", []byte("[Global]\nregion = eu\n"+tc.global))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Global.ClusterHealthCheck); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
