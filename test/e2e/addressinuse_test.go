package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/test/framework/netlab"
)

// TestAddressInUse: a station on the link that is no load-balancer host
// (lab host "printer", whose kernel holds two pool addresses as static
// ones) answers for the addresses a new dual-stack Service asks for. The
// agents probe before they first announce (ARP for IPv4, DAD for IPv6):
// neither address is held, the LoadBalancer's AddressConflict condition
// and Warning Events name the printer's MAC, Ready is false, the agents'
// metric counts both. The printer lets the addresses go: they are held
// and announced, the condition turns false. The printer takes the IPv4
// one again: its holder keeps it and defends it (Defended), nothing
// moves. The hosts report the conflict in status.hosts[].inUse, and the
// controller manager hands the address to no other Service: with the
// Service deleted, a new one gets the next address of the pool, though
// the printer's is the lowest.
//
// Two agents sharing the addresses over memberlist, and a lone agent
// (--vip-ownership=all), which gossips with nobody but probes and
// defends the same way (it skips the controller manager's part, which
// does not depend on the agents).
func TestAddressInUse(t *testing.T) {
	t.Run("memberlist", func(t *testing.T) { testAddressInUse(t, startHAEnvKeys(t, 2, true, false), true) })
	t.Run("lone agent", func(t *testing.T) { testAddressInUse(t, startLoneEnv(t), false) })
}

func testAddressInUse(t *testing.T, env *haEnv, allocation bool) {
	ctx := t.Context()
	printer, err := env.Lab.AddHost(ctx, "printer", netlab.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mac, err := printer.MAC()
	if err != nil {
		t.Fatal(err)
	}
	// 192.0.2.200: the lowest address of the pool, which the allocator
	// would hand out first.
	v4, v6 := netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("2001:db8:0:1::d7")
	ipAddr := func(op string, a netip.Addr) {
		t.Helper()
		args := []string{"addr", op, netip.PrefixFrom(a, a.BitLen()).String(), "dev", printer.Iface}
		if a.Is6() && op == "add" {
			args = append(args, "nodad")
		}
		if out, err := printer.Command(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v in printer: %v\n%s", args, err, out)
		}
	}
	ipAddr("add", v4)
	ipAddr("add", v6)

	env.create(t, newService("taken", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), dualStack,
		withAnnotation(annotation.LoadBalancerIPs, v4.String()+","+v6.String())))
	addrs := env.addresses(t, "taken", 2)
	t.Logf("addresses %v; printer's MAC %s", addrs, mac)

	// cond waits until a host's AddressConflict condition has status want
	// and reason (every host's that has one, for False) and returns it.
	cond := func(want metav1.ConditionStatus, reason string) metav1.Condition {
		var got metav1.Condition
		eventually(t, "AddressConflict "+string(want)+" "+reason, func() bool {
			conds := env.hostConditions(t, "taken", v1alpha1.ConditionAddressConflict)
			n := 0
			for _, c := range conds {
				if c.Status == want && c.Reason == reason {
					got, n = c, n+1
				}
			}
			return n > 0 && (want == metav1.ConditionTrue || n == len(conds))
		})
		return got
	}
	c := cond(metav1.ConditionTrue, "InUse")
	if !strings.Contains(c.Message, mac) || !strings.Contains(c.Message, "not announced") {
		t.Errorf("AddressConflict message %q does not name MAC %s", c.Message, mac)
	}
	if r := env.lbCondition(t, "taken", v1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != "AddressConflict" {
		t.Errorf("Ready = %+v, want false for AddressConflict", r)
	}
	for _, a := range []netip.Addr{v4, v6} {
		eventually(t, "a Warning Event naming "+a.String(), func() bool {
			return env.eventWith(t, "AddressConflict", a.String()+" is in use by MAC "+mac)
		})
	}
	eventually(t, "both addresses counted in use", func() bool {
		n := 0.0
		for i := range env.LBs {
			n += env.metric(t, i, "groundcloud_membership_addresses_in_use")
		}
		return n == 2
	})
	// Several probe rounds later, still neither is held by a load-balancer host.
	time.Sleep(3 * time.Second)
	for _, a := range []netip.Addr{v4, v6} {
		if h := env.holders.Now(a); len(h) > 0 {
			t.Errorf("%s held by %v while the printer answers for it", a, h)
		}
	}

	// The same in fields, for the controller manager and kubectl.
	eventually(t, "status.hosts[].inUse naming both addresses", func() bool {
		n := 0
		for _, h := range env.loadBalancer(t, "taken").Status.Hosts {
			for _, u := range h.InUse {
				if (u.Address == v4.String() || u.Address == v6.String()) && u.MAC == mac && !u.Announced {
					n++
				}
			}
		}
		return n >= 2
	})
	if allocation {
		// The controller manager hands the printer's address to no one
		// else: with "taken" deleted, a new Service gets the next address.
		env.delete(t, "taken")
		env.create(t, newService("next", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
		if got := env.addresses(t, "next", 1); len(got) != 1 || got[0] != v4.Next() {
			t.Errorf("next got %v, want %s (%s is in use)", got, v4.Next(), v4)
		}
		env.delete(t, "next")
		// Asked for by address, it is given (and the agents report it again).
		env.create(t, newService("taken", withPort(v1.ProtocolTCP, 80, env.nodePort(t)), dualStack,
			withAnnotation(annotation.LoadBalancerIPs, v4.String()+","+v6.String())))
		env.addresses(t, "taken", 2)
		cond(metav1.ConditionTrue, "InUse")
	}

	// The printer lets the addresses go.
	ipAddr("del", v4)
	ipAddr("del", v6)
	for _, a := range []netip.Addr{v4, v6} {
		if h, err := env.holders.WaitHeld(ctx, a, time.Minute); err != nil {
			t.Fatalf("%s not held after the printer let it go: %v", a, err)
		} else {
			t.Logf("%s held by %s", a, h)
		}
	}
	cond(metav1.ConditionFalse, "NoConflict")
	eventually(t, "Ready true", func() bool {
		r := env.lbCondition(t, "taken", v1alpha1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionTrue
	})
	eventually(t, "an AddressConflictResolved Event", func() bool { return env.countEvents(t, "AddressConflictResolved") >= 2 })

	// The printer takes the IPv4 address again: the holder defends it.
	holder := env.holders.Now(v4)
	ipAddr("add", v4)
	c = cond(metav1.ConditionTrue, "Defended")
	if !strings.Contains(c.Message, mac) || !strings.Contains(c.Message, "defends") {
		t.Errorf("AddressConflict message %q", c.Message)
	}
	if h := env.holders.Now(v4); len(h) != 1 || h[0] != holder[0] {
		t.Errorf("%s held by %v after the printer claimed it, want still %v", v4, h, holder)
	}
	ipAddr("del", v4)
	cond(metav1.ConditionFalse, "NoConflict")
}

func dualStack(s *v1.Service) {
	p := v1.IPFamilyPolicyRequireDualStack
	s.Spec.IPFamilyPolicy = &p
	s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
}

// lbCondition returns a condition of LoadBalancer name (nil: none).
func (env *lbEnv) lbCondition(t *testing.T, name, typ string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(env.loadBalancer(t, name).Status.Conditions, typ)
}

// hostConditions returns the conditions of type typ in the status.hosts
// of LoadBalancer name.
func (env *lbEnv) hostConditions(t *testing.T, name, typ string) []metav1.Condition {
	t.Helper()
	lb := env.loadBalancer(t, name)
	var out []metav1.Condition
	for _, h := range lb.Status.Hosts {
		if c := meta.FindStatusCondition(h.Conditions, typ); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// eventWith reports whether an Event in namespace default has reason and
// a message containing text.
func (env *lbEnv) eventWith(t *testing.T, reason, text string) bool {
	t.Helper()
	evs, err := env.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

// TestAddressInUseMoves: in a pool with address-conflict = move, a new
// Service given an address that a station which is no load-balancer host
// holds (the printer, on the pool's lowest address) is not announced
// there: the controller manager gives it the next free address once the
// agents report the conflict, writes it to the Service's status with an
// AddressMoved Event, and a host holds and announces the new one.
func TestAddressInUseMoves(t *testing.T) {
	env := startHAEnvKeys(t, 2, true, false)
	ctx := t.Context()
	// Reloaded within a second; a Service given the address before
	// that moves all the same once the pools are reloaded.
	env.setCloudConfig(t, "addresses = 192.0.2.200-192.0.2.219", "addresses = 192.0.2.200-192.0.2.219\naddress-conflict = move")
	printer, err := env.Lab.AddHost(ctx, "printer", netlab.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mac, err := printer.MAC()
	if err != nil {
		t.Fatal(err)
	}
	taken := netip.MustParseAddr("192.0.2.200")
	if out, err := printer.Command(ctx, "ip", "addr", "add", taken.String()+"/32", "dev", printer.Iface).CombinedOutput(); err != nil {
		t.Fatalf("ip addr add in printer: %v\n%s", err, out)
	}

	env.create(t, newService("mover", withPort(v1.ProtocolTCP, 80, env.nodePort(t))))
	var got []netip.Addr
	eventually(t, "mover moved off "+taken.String(), func() bool {
		got = env.addresses(t, "mover", 1)
		return got[0] != taken
	})
	if want := taken.Next(); got[0] != want {
		t.Errorf("mover moved to %s, want %s", got[0], want)
	}
	if lb := env.loadBalancer(t, "mover"); len(lb.Spec.Addresses) != 1 || lb.Spec.Addresses[0] != got[0].String() {
		t.Errorf("LoadBalancer spec.addresses = %v, want [%s]", lb.Spec.Addresses, got[0])
	}
	eventually(t, "an AddressMoved Event naming both addresses", func() bool {
		return env.eventWith(t, "AddressMoved", taken.String()+" is in use") && env.eventWith(t, "AddressMoved", "addresses now "+got[0].String())
	})
	eventually(t, "an AddressConflict Event naming the printer", func() bool {
		return env.eventWith(t, "AddressConflict", taken.String()+" is in use by MAC "+mac)
	})
	if h, err := env.holders.WaitHeld(ctx, got[0], time.Minute); err != nil {
		t.Fatalf("%s not held: %v", got[0], err)
	} else {
		t.Logf("%s held by %s", got[0], h)
	}
	if h := env.holders.Now(taken); len(h) > 0 {
		t.Errorf("%s held by %v while the printer answers for it", taken, h)
	}
}
