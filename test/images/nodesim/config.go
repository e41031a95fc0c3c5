package nodesim

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Config is what a simulated node serves. Zero ports are not allowed; an
// empty list serves nothing of that kind.
type Config struct {
	// Name is the node's name: the first word of every answer and part of
	// the names of the health files.
	Name string
	// TCPPorts and UDPPorts are NodePorts.
	TCPPorts, UDPPorts []uint16
	// HTTPPorts are NodePorts that answer any HTTP request with a line
	// naming the node and the client address as the node saw it.
	HTTPPorts []uint16
	// KubeProxyHealthzPort serves kube-proxy's GET /healthz; 0 disables it.
	KubeProxyHealthzPort uint16
	// HealthNodePorts serve like a Service's healthCheckNodePort with one
	// local endpoint.
	HealthNodePorts []uint16
	// StateDir holds the health files: "<Name>.unhealthy" fails every
	// health endpoint, "<Name>.<port>.unhealthy" only that port's. Empty:
	// always healthy.
	StateDir string
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" || c.Name == "." || c.Name == ".." || strings.ContainsAny(c.Name, "/ \n") {
		errs = append(errs, fmt.Errorf("name %q: want a non-empty word usable in a file name", c.Name))
	}
	tcp := slices.Concat(c.TCPPorts, c.HTTPPorts, c.HealthNodePorts)
	if c.KubeProxyHealthzPort != 0 {
		tcp = append(tcp, c.KubeProxyHealthzPort)
	}
	errs = append(errs, checkPorts("tcp", tcp), checkPorts("udp", c.UDPPorts))
	return errors.Join(errs...)
}

func checkPorts(proto string, ports []uint16) error {
	var errs []error
	seen := map[uint16]bool{}
	for _, p := range ports {
		switch {
		case p == 0:
			errs = append(errs, fmt.Errorf("%s port 0 is not a port", proto))
		case seen[p]:
			errs = append(errs, fmt.Errorf("%s port %d is given twice", proto, p))
		}
		seen[p] = true
	}
	return errors.Join(errs...)
}

// ParseFlags parses command-line flags into a validated Config. It returns
// flag.ErrHelp for -h.
func ParseFlags(name string, args []string) (Config, error) {
	c := Config{KubeProxyHealthzPort: 10256}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&c.Name, "name", "", "node name, the first word of every answer")
	fs.Var((*portList)(&c.TCPPorts), "tcp-ports", "comma-separated TCP NodePorts")
	fs.Var((*portList)(&c.UDPPorts), "udp-ports", "comma-separated UDP NodePorts")
	fs.Var((*portList)(&c.HTTPPorts), "http-ports", "comma-separated HTTP NodePorts")
	fs.Func("kube-proxy-healthz-port", "port of kube-proxy's /healthz (0: none) (default 10256)", func(s string) error {
		p, err := strconv.ParseUint(s, 10, 16)
		c.KubeProxyHealthzPort = uint16(p)
		return err
	})
	fs.Var((*portList)(&c.HealthNodePorts), "health-node-ports", "comma-separated healthCheckNodePorts")
	fs.StringVar(&c.StateDir, "state-dir", "", "directory of <name>.unhealthy and <name>.<port>.unhealthy files")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid flags: %w", err)
	}
	return c, nil
}

// portList is a flag.Value of comma-separated ports.
type portList []uint16

func (l *portList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

func (l *portList) Set(s string) error {
	*l = nil
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.ParseUint(f, 10, 16)
		if err != nil {
			return fmt.Errorf("port %q: %w", f, err)
		}
		*l = append(*l, uint16(p))
	}
	return nil
}
