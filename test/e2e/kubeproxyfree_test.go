package e2e

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/agent"
)

// TestClusterWithoutKubeProxy: on nodes where nothing answers kube-proxy's
// :10256/healthz (a kube-proxy replacement), a Service with
// externalTrafficPolicy Cluster has no healthy backend from the start. The
// agent says so and what to configure: the LoadBalancer is not Ready
// (reason NoHealthyBackend, a message naming cluster-health-check), and its
// log has a line. (The Warning Event of an agent with an event recorder:
// internal/agent TestNoteNeverHealthy.) Setting
// cluster-health-check = tcp-node-port in the cloud-config (reloaded)
// makes the controller manager write a TCP check of the Service's NodePort,
// and every node carries traffic.
func TestClusterWithoutKubeProxy(t *testing.T) {
	env := startLBEnv(t)
	for _, n := range env.nodeNames() {
		env.setUnhealthy(t, n+".10256.unhealthy", true)
	}
	np := env.nodePort(t)
	env.create(t, newService("web", withPort(v1.ProtocolTCP, 80, np)))
	vip := env.addresses(t, "web", 1)[0]

	eventually(t, "web not Ready, reason NoHealthyBackend", func() bool {
		lb := env.loadBalancer(t, "web")
		c := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == agent.ReasonNoHealthyBackend
	})
	if c := meta.FindStatusCondition(env.loadBalancer(t, "web").Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "cluster-health-check") {
		t.Errorf("Ready says %q, want it to name cluster-health-check", c.Message)
	}
	waitLog(t, env.Agent(0).LogPath, "LoadBalancer has had no healthy backend")

	env.setCloudConfig(t, "region = lab\n", "region = lab\ncluster-health-check = tcp-node-port\n")
	eventually(t, "web's health check a TCP connection to its NodePort", func() bool {
		hc := env.loadBalancer(t, "web").Spec.HealthCheck
		return hc != nil && hc.Type == v1alpha1.HealthCheckTCP && hc.Port == np && hc.Path == ""
	})
	eventually(t, "web Ready", func() bool { return env.ready(t, "web") == metav1.ConditionTrue })
	env.nodesReached(t, netip.AddrPortFrom(vip, 80), env.nodeNames()...)
}
