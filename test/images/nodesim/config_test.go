package nodesim

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr []string // each must appear in the error
	}{
		{
			name: "all flags",
			args: []string{"--name=node-1", "--tcp-ports=30080, 30081", "--udp-ports=30053", "--kube-proxy-healthz-port=10257", "--health-node-ports=32000,32001", "--state-dir=/tmp/x"},
			want: Config{Name: "node-1", TCPPorts: []uint16{30080, 30081}, UDPPorts: []uint16{30053}, KubeProxyHealthzPort: 10257, HealthNodePorts: []uint16{32000, 32001}, StateDir: "/tmp/x"},
		},
		{
			name: "defaults",
			args: []string{"--name=n"},
			want: Config{Name: "n", KubeProxyHealthzPort: 10256},
		},
		{
			name: "no kube-proxy port",
			args: []string{"--name=n", "--kube-proxy-healthz-port=0", "--health-node-ports=10256"},
			want: Config{Name: "n", HealthNodePorts: []uint16{10256}},
		},
		{
			name:    "every problem at once",
			args:    []string{"--name=a/b", "--tcp-ports=0,30080", "--health-node-ports=30080,10256", "--udp-ports=30053,30053"},
			wantErr: []string{`name "a/b"`, "tcp port 0 is not a port", "tcp port 30080 is given twice", "tcp port 10256 is given twice", "udp port 30053 is given twice"},
		},
		{
			name:    "missing name",
			args:    []string{},
			wantErr: []string{`name ""`},
		},
		{
			name:    "port out of range",
			args:    []string{"--name=n", "--tcp-ports=65536"},
			wantErr: []string{`port "65536"`},
		},
		{
			name:    "stray argument",
			args:    []string{"--name=n", "extra"},
			wantErr: []string{`unexpected arguments ["extra"]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFlags("nodesim", tt.args)
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not contain %q", err, want)
				}
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); err == nil && diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := ParseFlags("nodesim", []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
}
