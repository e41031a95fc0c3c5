package loadbalancers

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// ErrSourceRanges: a Service's source ranges cannot all be used; its load
// balancer then accepts no client (see DenyAllSourceRanges).
var ErrSourceRanges = errors.New("source ranges unusable")

// DenyAllSourceRanges is spec.sourceRanges of a load balancer that must
// accept no client: 0.0.0.0/32 and ::1/128. Agents program "drop every
// source but these", and Linux never forwards a packet from either that
// arrives from the network: it drops an IPv6 source ::1 on a non-loopback
// interface before any netfilter hook, and an IPv4 source 0.0.0.0 as a
// martian when routing it after DNAT. (The IPv6 unspecified address ::
// does not do: a one-armed host forwards it.) Agents of every version read
// it so; a field of its own would be ignored by agents older than the
// field, which would then allow everyone.
var DenyAllSourceRanges = []string{"0.0.0.0/32", "::1/128"}

// SourceRanges returns the client networks svc allows, as a LoadBalancer's
// spec.sourceRanges: each masked, canonical, sorted, once; nil allows
// every client.
//
// It reads them as upstream does (k8s.io/cloud-provider service/helpers
// GetLoadBalancerSourceRanges): spec.loadBalancerSourceRanges when it has
// entries, else the annotation service.beta.kubernetes.io/load-balancer-source-ranges,
// a comma-separated list where an empty value allows everyone. It accepts
// what the apiserver accepted before it validated strictly, as stored
// objects may still hold it: surrounding spaces, leading zeros, bits set
// beyond the prefix length, and IPv4-mapped IPv6 (read as IPv4).
//
// It fails closed: when any entry cannot be used, or there are more than
// MaxSourceRanges, it returns DenyAllSourceRanges and an error wrapping
// ErrSourceRanges that names each problem.
func SourceRanges(svc *v1.Service) ([]string, error) {
	field := "spec.loadBalancerSourceRanges"
	entries := svc.Spec.LoadBalancerSourceRanges
	if len(entries) == 0 {
		field = "annotation " + v1.AnnotationLoadBalancerSourceRangesKey
		val := strings.TrimSpace(svc.Annotations[v1.AnnotationLoadBalancerSourceRangesKey])
		if val == "" {
			return nil, nil
		}
		entries = strings.Split(val, ",")
	}
	var out []string
	var problems []string
	for _, e := range entries {
		p, err := parseSourceRange(e)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		out = append(out, p.String())
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(problems) == 0 && len(out) > MaxSourceRanges {
		problems = append(problems, fmt.Sprintf("%d ranges, more than a LoadBalancer holds (%d); merge them into fewer, wider ranges", len(out), MaxSourceRanges))
	}
	if len(problems) > 0 {
		return slices.Clone(DenyAllSourceRanges), fmt.Errorf("%w: %s: %s; until every entry is a CIDR such as 10.0.0.0/24 the load balancer accepts no client",
			ErrSourceRanges, field, strings.Join(problems, "; "))
	}
	return out, nil
}

// parseSourceRange reads one entry leniently and returns it masked.
func parseSourceRange(entry string) (netip.Prefix, error) {
	ip, ipnet, err := netutils.ParseCIDRSloppy(strings.TrimSpace(entry))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", entry)
	}
	addr, ok := netip.AddrFromSlice(ip) // as written, before masking
	bits, total := ipnet.Mask.Size()
	if !ok || total == 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", entry)
	}
	switch {
	case total == 32:
		addr = addr.Unmap()
	case addr.Is4In6():
		// IPv4-mapped IPv6: what Go's net.IPNet, which Kubernetes used,
		// matches IPv4 clients against.
		if bits < 96 {
			return netip.Prefix{}, fmt.Errorf("%q mixes IPv4-mapped and IPv6 addresses; write it as IPv4 or IPv6", entry)
		}
		addr, bits = addr.Unmap(), bits-96
	}
	return netip.PrefixFrom(addr, bits).Masked(), nil
}
