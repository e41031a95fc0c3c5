package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestNodesimInLab builds the binary, runs it in a lab host and talks to it
// from another host: NodePorts, both health endpoints, health flipped
// through the state directory, and a clean exit on SIGTERM.
func TestNodesimInLab(t *testing.T) {
	l := netlab.NewT(t, netlab.Options{})
	bin := filepath.Join(t.TempDir(), "groundcloud-nodesim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	node := l.AddHostT(t, "node1", netlab.HostOptions{})
	client := l.AddHostT(t, "client", netlab.HostOptions{})
	state := t.TempDir()
	p, err := node.Start(t.Context(), filepath.Join(t.TempDir(), "nodesim.log"), bin,
		"--name=node1", "--tcp-ports=30080", "--udp-ports=30053",
		"--kube-proxy-healthz-port=10256", "--health-node-ports=32000,32001", "--state-dir="+state)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := p.WaitForOutput(ctx, "nodesim: ready"); err != nil {
		t.Fatal(err)
	}

	for _, pair := range [][2]netip.Addr{{client.Addr4, node.Addr4}, {client.Addr6, node.Addr6}} {
		src, dst := pair[0], pair[1]
		conn, err := client.DialTCP(ctx, netip.AddrPortFrom(dst, 30080))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		r := bufio.NewReader(conn)
		fmt.Fprintf(conn, "ping\n")
		got, _ := r.ReadString('\n')
		got2, _ := r.ReadString('\n')
		conn.Close()
		if want := fmt.Sprintf("node1 %s\nnode1 ping\n", conn.LocalAddr()); got+got2 != want {
			t.Errorf("tcp %s: %q, want %q", dst, got+got2, want)
		}
		reply, err := client.UDPExchange(ctx, netip.AddrPortFrom(dst, 30053), []byte("hi"))
		if want := strings.TrimSuffix("node1 "+netip.AddrPortFrom(src, 0).String(), "0"); err != nil || !strings.HasPrefix(string(reply), want) {
			t.Errorf("udp %s: %q, %v; want %q<port>", dst, reply, err, want)
		}
	}

	hc := client.HTTPClient()
	check := func(step string, want map[uint16]int) {
		t.Helper()
		for _, dst := range []netip.Addr{node.Addr4, node.Addr6} {
			for port, code := range want {
				url := fmt.Sprintf("http://%s/healthz", netip.AddrPortFrom(dst, port))
				resp, err := hc.Get(url)
				if err != nil {
					t.Errorf("%s: GET %s: %v", step, url, err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != code {
					t.Errorf("%s: GET %s = %d %s, want %d", step, url, resp.StatusCode, body, code)
				}
				if port == 32000 && code == 200 && string(body) != `{"localEndpoints":1,"serviceProxyHealthy":true}`+"\n" {
					t.Errorf("%s: GET %s body %q", step, url, body)
				}
			}
		}
	}
	flip := func(file string, unhealthy bool) {
		t.Helper()
		path := filepath.Join(state, file)
		err := os.Remove(path)
		if unhealthy {
			err = os.WriteFile(path, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check("healthy", map[uint16]int{10256: 200, 32000: 200, 32001: 200})
	flip("node1.32000.unhealthy", true)
	check("port 32000 unhealthy", map[uint16]int{10256: 200, 32000: 503, 32001: 200})
	flip("node1.32000.unhealthy", false)
	flip("node1.unhealthy", true)
	check("node unhealthy", map[uint16]int{10256: 503, 32000: 503, 32001: 503})
	flip("node1.unhealthy", false)
	check("healthy again", map[uint16]int{10256: 200, 32000: 200, 32001: 200})

	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Errorf("exit after SIGTERM: %v; log:\n%s", err, p.Output())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("stopping took %s", d)
	}
}
