package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/health"
)

func withAddresses(a ...string) func(*v1alpha1.LoadBalancer) {
	return func(lb *v1alpha1.LoadBalancer) { lb.Spec.Addresses = a }
}

// TestTranslateProblems: what the agent leaves out of each LoadBalancer,
// by object: a frontend another LoadBalancer holds (a conflict), and
// addresses that cannot be virtual IPs, which are neither programmed nor
// held.
func TestTranslateProblems(t *testing.T) {
	p := Translate([]*v1alpha1.LoadBalancer{
		newLB("first"),
		newLB("second"), // the same 192.0.2.200 TCP/80
		newLB("multicast", withAddresses("224.0.0.5")),
		newLB("loopback", withAddresses("127.0.0.2", "2001:db8::c8")),
		newLB("open", withAddresses("192.0.2.201"), func(lb *v1alpha1.LoadBalancer) { lb.Spec.SourceRanges = []string{"not-a-cidr"} }),
	}, testNodes(), Host{}, func(health.Target) health.State { return health.Healthy })
	want := map[string]Problems{
		"default/second":    {Conflict: true, Messages: []string{`192.0.2.200 TCP/80 is already used by service "default/first"`}},
		"default/multicast": {Messages: []string{"address 224.0.0.5: not usable as a virtual IP"}},
		"default/loopback":  {Messages: []string{"address 127.0.0.2: not usable as a virtual IP"}},
		"default/open": {Messages: []string{`source range "not-a-cidr" is not a CIDR`,
			`unusable source range "invalid Prefix": it matches no client`}},
	}
	if diff := cmp.Diff(want, p.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	wantVIPs := []netip.Addr{netip.MustParseAddr("192.0.2.200"), netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8::c8")}
	if diff := cmp.Diff(wantVIPs, p.VIPs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("VIPs (-want +got):\n%s", diff)
	}
	for _, s := range p.State.Services {
		if s.Name == "default/open" && len(s.SourceRanges) == 0 {
			t.Error("an unreadable source range opened the service to every client")
		}
	}
}

// TestDesiredStatusWithProblems: a LoadBalancer that lost a conflict, or
// has parts that cannot be programmed, is not Ready and says why: on this
// host's Programmed condition and on Ready. The same problems again are no
// change (one write per change).
func TestDesiredStatusWithProblems(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	vip := netip.MustParseAddr("192.0.2.200")
	lb := newLB("second")
	conflict := Problems{Conflict: true, Messages: []string{`192.0.2.200 TCP/80 is already used by service "default/first"`}}
	r := hostReport{Host: "lb-1", Programmed: true, Message: "data plane programmed", Held: []netip.Addr{vip}, Problems: conflict}
	st, changed := desiredStatus(lb, r, now)
	if !changed {
		t.Fatal("no change")
	}
	wantMsg := `not programmed: 192.0.2.200 TCP/80 is already used by service "default/first"`
	for what, c := range map[string]*metav1.Condition{
		"Programmed": meta.FindStatusCondition(st.Hosts[0].Conditions, v1alpha1.ConditionProgrammed),
		"Ready":      meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady),
	} {
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonConflict || c.Message != wantMsg {
			t.Errorf("%s: %+v, want False %s %q", what, c, ReasonConflict, wantMsg)
		}
	}
	lb.Status = st
	if _, changed := desiredStatus(lb, r, now); changed {
		t.Error("the same problems again are a change")
	}
	// Solved: Ready again.
	r.Problems = Problems{}
	st, changed = desiredStatus(lb, r, now)
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); !changed || c.Status != metav1.ConditionTrue || c.Reason != ReasonSynced {
		t.Errorf("solved: changed %v, Ready %+v", changed, c)
	}

	// Invalid, and many problems: the message stays bounded.
	var many []string
	for i := range 15 {
		many = append(many, "problem "+string(rune('a'+i)))
	}
	st, _ = desiredStatus(newLB("x"), hostReport{Host: "lb-1", Programmed: true, ReportsReady: true, Problems: Problems{Messages: many}}, now)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalid || !strings.HasSuffix(c.Message, "; and 5 more") {
		t.Errorf("many problems: %+v", c)
	}
}

// TestReportsUnheld: a LoadBalancer none of whose addresses is usable is
// held by no host; the host that would own its first address says why it
// is not Ready, the others do not.
func TestReportsUnheld(t *testing.T) {
	bad := Problems{Messages: []string{"address 224.0.0.5: not usable as a virtual IP"}}
	multicast := newLB("m", withAddresses("224.0.0.5"))
	if !(&Agent{cfg: Config{Owner: AllAddresses{}}}).reportsUnheld(multicast, bad) {
		t.Error("the owner of the first address does not report")
	}
	if (&Agent{cfg: Config{Owner: NoAddresses{}}}).reportsUnheld(multicast, bad) {
		t.Error("a host that owns nothing reports")
	}
	if (&Agent{cfg: Config{Owner: AllAddresses{}}}).reportsUnheld(newLB("ok"), bad) {
		t.Error("reports for a LoadBalancer with a usable address, which its holder reports")
	}
	if (&Agent{cfg: Config{Owner: AllAddresses{}}}).reportsUnheld(multicast, Problems{}) {
		t.Error("reports without problems")
	}
}
