package clustertest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/realcluster"
)

// checkAddressInUse: a station on the link that is no load-balancer host
// (the client host "outsider", holding two pool addresses as static ones,
// as a printer with a forgotten address would) answers for the addresses a
// new dual-stack Service asks for. The agents probe before they first
// announce: no load-balancer host holds either address, each host that
// owns one says so in its AddressConflict condition (True, InUse) and in
// status.hosts[].inUse with the outsider's MAC, Ready is False, the
// Service gets a Warning Event per address. The outsider lets them go: a
// host holds each, the condition turns False, and the client reaches the
// Service's Pods on both.
func checkAddressInUse(t *testing.T, c *realcluster.Cluster) {
	ctx := t.Context()
	outsider := c.Clients["outsider"]
	_, last4, _ := strings.Cut(c.Opts.Pool4, "-")
	_, last6, _ := strings.Cut(c.Opts.Pool6, "-")
	// Near the end of the ranges, where no other check asks.
	v4, v6 := netip.MustParseAddr(last4).Prev().Prev(), netip.MustParseAddr(last6).Prev().Prev()
	ip := func(op string, a netip.Addr) error {
		args := []string{"addr", op, netip.PrefixFrom(a, a.BitLen()).String(), "dev", outsider.Iface}
		if a.Is6() && op == "add" {
			args = append(args, "nodad")
		}
		if out, err := outsider.Command(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s in %s: %w\n%s", strings.Join(args, " "), outsider.Name, err, out)
		}
		return nil
	}
	for _, a := range []netip.Addr{v4, v6} {
		if err := ip("add", a); err != nil {
			t.Fatal(err)
		}
	}
	released := false
	t.Cleanup(func() {
		if !released {
			_, _ = outsider.Command(context.Background(), "ip", "addr", "del", netip.PrefixFrom(v4, 32).String(), "dev", outsider.Iface).CombinedOutput()
			_, _ = outsider.Command(context.Background(), "ip", "addr", "del", netip.PrefixFrom(v6, 128).String(), "dev", outsider.Iface).CombinedOutput()
		}
	})
	mac, err := outsider.MAC()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the outsider (%s) holds %s and %s", mac, v4, v6)

	s := deploy(t, c, "inuse", 1, nil, requireDualStack, func(svc *corev1.Service) {
		svc.Annotations[annotation.LoadBalancerIPs] = v4.String() + "," + v6.String()
	})
	if len(s.vips) != 2 || s.vips[0] != v4 || s.vips[1] != v6 {
		t.Fatalf("inuse got %v, want %s and %s", s.vips, v4, v6)
	}
	lbs := lbObjects(t, c)
	// reported returns the addresses the hosts report in use by mac, and
	// the AddressConflict conditions with status want.
	reported := func(ctx context.Context, want metav1.ConditionStatus) (map[string]bool, []metav1.Condition, *v1alpha1.LoadBalancer) {
		lb, err := lbs.Get(ctx, echoNS, "inuse")
		if err != nil {
			return nil, nil, nil
		}
		inUse := map[string]bool{}
		var conds []metav1.Condition
		for _, h := range lb.Status.Hosts {
			for _, u := range h.InUse {
				if u.MAC == mac && !u.Announced {
					inUse[u.Address] = true
				}
			}
			if cond := meta.FindStatusCondition(h.Conditions, v1alpha1.ConditionAddressConflict); cond != nil && cond.Status == want {
				conds = append(conds, *cond)
			}
		}
		return inUse, conds, lb
	}
	var lb *v1alpha1.LoadBalancer
	eventually(t, "both addresses reported in use by the outsider", func(ctx context.Context) bool {
		inUse, conds, got := reported(ctx, metav1.ConditionTrue)
		lb = got
		return inUse[v4.String()] && inUse[v6.String()] && len(conds) > 0
	})
	for _, h := range lb.Status.Hosts {
		if cond := meta.FindStatusCondition(h.Conditions, v1alpha1.ConditionAddressConflict); cond != nil &&
			(cond.Reason != "InUse" || !strings.Contains(cond.Message, mac) || !strings.Contains(cond.Message, "not announced")) {
			t.Errorf("%s's AddressConflict: %+v", h.Name, cond)
		}
	}
	if r := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != "AddressConflict" {
		t.Errorf("Ready = %+v, want False for AddressConflict", r)
	}
	for _, a := range []netip.Addr{v4, v6} {
		eventually(t, "a Warning Event naming "+a.String()+" and the outsider", func(ctx context.Context) bool {
			evs, err := c.Client.CoreV1().Events(echoNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=AddressConflict,involvedObject.name=inuse"})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, a.String()+" is in use by MAC "+mac) {
					return true
				}
			}
			return false
		})
	}
	for _, n := range c.Nodes {
		if !n.LoadBalancer {
			continue
		}
		for _, a := range []netip.Addr{v4, v6} {
			if addr, _ := hostHolds(t, n.Host, a); addr {
				t.Errorf("%s holds %s while the outsider answers for it", n.Name, a)
			}
		}
	}

	// The outsider lets the addresses go.
	for _, a := range []netip.Addr{v4, v6} {
		if err := ip("del", a); err != nil {
			t.Fatal(err)
		}
	}
	released = true
	eventually(t, "AddressConflict False on every host that had it, nothing reported in use", func(ctx context.Context) bool {
		inUse, stillTrue, got := reported(ctx, metav1.ConditionTrue)
		_, cleared, _ := reported(ctx, metav1.ConditionFalse)
		return got != nil && len(inUse) == 0 && len(stillTrue) == 0 && len(cleared) > 0
	})
	client := lbClient(c.Clients["client"])
	for _, a := range []netip.Addr{v4, v6} {
		eventually(t, "a load-balancer host holds "+a.String(), func(context.Context) bool {
			for _, n := range c.Nodes {
				if addr, _ := hostHolds(t, n.Host, a); n.LoadBalancer && addr {
					return true
				}
			}
			return false
		})
		waitServing(t, client, url(a))
		ans, err := get(ctx, client, url(a))
		if err != nil || !strings.HasPrefix(ans.pod, "inuse-") {
			t.Errorf("%s answered %+v, %v; want a Pod of inuse", a, ans, err)
		}
	}
	eventually(t, "Ready True", func(ctx context.Context) bool {
		lb, err := lbs.Get(ctx, echoNS, "inuse")
		if err != nil {
			return false
		}
		r := meta.FindStatusCondition(lb.Status.Conditions, v1alpha1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionTrue
	})
	if err := c.Client.CoreV1().Services(echoNS).Delete(ctx, "inuse", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
