package ipam

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
)

const ipsHint = "use comma-separated addresses, at most one IPv4 and one IPv6"

// Port is a port a Service uses on its addresses. Two Services sharing an
// address must not use the same Port.
type Port struct {
	Protocol v1.Protocol
	Port     int32
}

func (p Port) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

func comparePorts(a, b Port) int {
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

// Request is what a Service asks of the Allocator.
type Request struct {
	Key types.NamespacedName // the Service; Key.Namespace decides which pools it may use
	// Pool is the pool to allocate from; "" means the pool holding the
	// requested Addresses, or else an auto-assign pool.
	Pool string
	// Families are the families wanted, the primary first. SingleStack
	// takes one; RequireDualStack both; PreferDualStack one or two, of
	// which at least one must be assigned.
	Families     []v1.IPFamily
	FamilyPolicy v1.IPFamilyPolicy
	Addresses    []netip.Addr // requested, at most one per family in Families
	SharingKey   string       // "" shares nothing; else a label value
	Ports        []Port
	// Forwarding is the Service's own forwarding (annotation
	// groundcloud.io/forwarding); "" takes its pool's.
	Forwarding config.Forwarding
}

// RequestFromService reads the request of a LoadBalancer Service from its
// spec and annotations. It reports every problem at once; each wraps
// ErrInvalidRequest and says what to change. svc is not modified.
func RequestFromService(svc *v1.Service) (Request, error) {
	r := &serviceReader{svc: svc, key: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}
	req := Request{
		Key:        r.key,
		Pool:       strings.TrimSpace(svc.Annotations[annotation.Pool]),
		SharingKey: r.sharingKey(),
		Ports:      r.ports(),
	}
	// A forwarding annotation that cannot be used takes the pool's; the
	// caller reports it (ServiceForwarding).
	req.Forwarding, _ = ServiceForwarding(svc)
	req.Families, req.FamilyPolicy = r.families()
	req.Addresses = r.addresses(req.Families)
	if len(r.errs) > 0 {
		return Request{}, errors.Join(r.errs...)
	}
	return req, nil
}

type serviceReader struct {
	svc  *v1.Service
	key  types.NamespacedName
	errs []error
}

func (r *serviceReader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("service %s: %w: "+format, append([]any{r.key, ErrInvalidRequest}, args...)...))
}

func (r *serviceReader) families() ([]v1.IPFamily, v1.IPFamilyPolicy) {
	fams := r.svc.Spec.IPFamilies
	for i, f := range fams {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			r.fail("spec.ipFamilies[%d] is %q; use IPv4 or IPv6", i, f)
			return nil, ""
		}
		if slices.Index(fams, f) != i {
			r.fail("spec.ipFamilies lists %s twice; list each family once", f)
			return nil, ""
		}
	}
	primary := v1.IPv4Protocol
	if len(fams) > 0 {
		primary = fams[0]
	}
	policy := v1.IPFamilyPolicySingleStack
	if p := r.svc.Spec.IPFamilyPolicy; p != nil {
		policy = *p
	}
	switch policy {
	case v1.IPFamilyPolicySingleStack:
		return []v1.IPFamily{primary}, policy
	case v1.IPFamilyPolicyPreferDualStack:
		// The apiserver lists both families only when the cluster is
		// dual-stack; a second address in a single-stack cluster would
		// point at nodes without addresses of that family.
		if len(fams) == 1 {
			return []v1.IPFamily{primary}, policy
		}
		return []v1.IPFamily{primary, otherFamily(primary)}, policy
	case v1.IPFamilyPolicyRequireDualStack:
		return []v1.IPFamily{primary, otherFamily(primary)}, policy
	}
	r.fail("spec.ipFamilyPolicy is %q; use SingleStack, PreferDualStack or RequireDualStack", policy)
	return nil, ""
}

func otherFamily(f v1.IPFamily) v1.IPFamily {
	if f == v1.IPv6Protocol {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// addresses reads the requested addresses: the annotation, else the
// deprecated spec.loadBalancerIP.
func (r *serviceReader) addresses(fams []v1.IPFamily) []netip.Addr {
	ann := strings.TrimSpace(r.svc.Annotations[annotation.LoadBalancerIPs])
	legacy := strings.TrimSpace(r.svc.Spec.LoadBalancerIP)
	if ann == "" && legacy == "" {
		return nil
	}
	if ann == "" {
		a, ok := r.parseAddr("spec.loadBalancerIP", legacy)
		if !ok {
			return nil
		}
		return r.checkFamilies("spec.loadBalancerIP", []netip.Addr{a}, fams)
	}
	addrs := r.parseList(ann)
	if addrs == nil {
		return nil
	}
	if legacy != "" {
		a, ok := r.parseAddr("spec.loadBalancerIP", legacy)
		if !ok {
			return nil
		}
		if !slices.Contains(addrs, a) {
			r.fail("spec.loadBalancerIP %q is not among annotation %s %q; remove spec.loadBalancerIP (it is deprecated) or make it one of the annotation's addresses",
				legacy, annotation.LoadBalancerIPs, ann)
			return nil
		}
	}
	return r.checkFamilies("annotation "+annotation.LoadBalancerIPs, addrs, fams)
}

func (r *serviceReader) parseList(list string) []netip.Addr {
	where := "annotation " + annotation.LoadBalancerIPs
	var addrs []netip.Addr
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			r.fail("%s: %q has an empty entry; %s", where, list, ipsHint)
			return nil
		}
		a, ok := r.parseAddr(where, entry)
		if !ok {
			return nil
		}
		if slices.ContainsFunc(addrs, func(b netip.Addr) bool { return familyOf(a) == familyOf(b) }) {
			r.fail("%s: %q has more than one %s address; %s", where, list, familyOf(a).ipFamily(), ipsHint)
			return nil
		}
		addrs = append(addrs, a)
	}
	return addrs
}

// parseAddr parses one address s, found at where.
func (r *serviceReader) parseAddr(where, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		r.fail("%s: %q is not an IP address; %s", where, s, ipsHint)
	case a.Zone() != "":
		r.fail("%s: %q has a zone; write the address without %%zone", where, s)
	case a.Is4In6():
		r.fail("%s: %q is an IPv4-mapped IPv6 address; write it as %s", where, s, a.Unmap())
	default:
		return a, true
	}
	return netip.Addr{}, false
}

func (r *serviceReader) checkFamilies(where string, addrs []netip.Addr, fams []v1.IPFamily) []netip.Addr {
	if fams == nil {
		return nil // the families are wrong, and reported
	}
	for _, a := range addrs {
		if f := familyOf(a).ipFamily(); !slices.Contains(fams, f) {
			r.fail("%s: %s is %s but the Service is single-stack %s; request an %s address, or set spec.ipFamilyPolicy to PreferDualStack or RequireDualStack",
				where, a, f, fams[0], fams[0])
			return nil
		}
	}
	return addrs
}

func (r *serviceReader) sharingKey() string {
	k, ok := r.svc.Annotations[annotation.AllowSharedIP]
	if !ok {
		return ""
	}
	if k == "" {
		r.fail("annotation %s is empty; set it to a sharing key (the same on every Service that may share an address) or remove it", annotation.AllowSharedIP)
		return ""
	}
	if msgs := content.IsLabelValue(k); len(msgs) > 0 {
		r.fail("annotation %s: %q is not a valid sharing key (%s); use at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit",
			annotation.AllowSharedIP, k, strings.Join(msgs, "; "))
		return ""
	}
	return k
}

func (r *serviceReader) ports() []Port {
	var ports []Port
	for i, sp := range r.svc.Spec.Ports {
		p := Port{Protocol: sp.Protocol, Port: sp.Port}
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if err := checkPort(p); err != "" {
			r.fail("spec.ports[%d]: %s", i, err)
			continue
		}
		ports = append(ports, p)
	}
	return normalizePorts(ports)
}

func checkPort(p Port) string {
	switch p.Protocol {
	case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
	default:
		return fmt.Sprintf("protocol %q is not TCP, UDP or SCTP", p.Protocol)
	}
	if p.Port < 1 || p.Port > 65535 {
		return fmt.Sprintf("port %d is not between 1 and 65535", p.Port)
	}
	return ""
}

// normalizePorts returns ports sorted and without duplicates, in a new slice.
func normalizePorts(ports []Port) []Port {
	ports = slices.Clone(ports)
	slices.SortFunc(ports, comparePorts)
	return slices.Compact(ports)
}

// normalized checks a Request that may have been built by hand and returns
// a copy the Allocator can keep: ports sorted and deduplicated.
func (req Request) normalized() (Request, error) {
	if msg := req.problem(); msg != "" {
		return Request{}, fmt.Errorf("service %s: %w: %s", req.Key, ErrInvalidRequest, msg)
	}
	req.Families = slices.Clone(req.Families)
	req.Addresses = slices.Clone(req.Addresses)
	req.Ports = normalizePorts(req.Ports)
	return req, nil
}

func (req Request) problem() string {
	if req.Key.Namespace == "" || req.Key.Name == "" {
		return "the key needs a namespace and a name"
	}
	if msg := checkFamilies(req.Families, req.FamilyPolicy); msg != "" {
		return msg
	}
	var seen [2]bool
	for _, a := range req.Addresses {
		if msg := checkAddr(a); msg != "" {
			return msg
		}
		f := familyOf(a)
		if !slices.Contains(req.Families, f.ipFamily()) {
			return fmt.Sprintf("requested address %s is %s, which is not among the families %v", a, f.ipFamily(), req.Families)
		}
		if seen[f] {
			return fmt.Sprintf("more than one %s address requested; request at most one per family", f.ipFamily())
		}
		seen[f] = true
	}
	if req.SharingKey != "" {
		if msgs := content.IsLabelValue(req.SharingKey); len(msgs) > 0 {
			return fmt.Sprintf("sharing key %q is not a label value: %s", req.SharingKey, strings.Join(msgs, "; "))
		}
	}
	for _, p := range req.Ports {
		if msg := checkPort(p); msg != "" {
			return msg
		}
	}
	return checkForwarding(req.Forwarding)
}

func checkForwarding(f config.Forwarding) string {
	switch f {
	case "", config.ForwardingPassthrough, config.ForwardingProxy:
		return ""
	}
	return fmt.Sprintf("forwarding %q is not passthrough or proxy", f)
}

func checkFamilies(fams []v1.IPFamily, policy v1.IPFamilyPolicy) string {
	for i, f := range fams {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return fmt.Sprintf("family %q is not IPv4 or IPv6", f)
		}
		if slices.Index(fams, f) != i {
			return fmt.Sprintf("family %s is listed twice", f)
		}
	}
	switch {
	case policy == v1.IPFamilyPolicySingleStack && len(fams) == 1,
		policy == v1.IPFamilyPolicyPreferDualStack && len(fams) >= 1,
		policy == v1.IPFamilyPolicyRequireDualStack && len(fams) == 2:
		return ""
	}
	return fmt.Sprintf("family policy %q does not fit families %v", policy, fams)
}

func checkAddr(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "an address is not valid"
	case a.Zone() != "":
		return fmt.Sprintf("address %s has a zone", a)
	case a.Is4In6():
		return fmt.Sprintf("address %s is IPv4-mapped; write it as %s", a, a.Unmap())
	}
	return ""
}
