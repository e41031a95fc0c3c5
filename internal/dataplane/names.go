package dataplane

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"hash/fnv"
	"strings"
)

// Names of the fixed chains and maps of each table (modelled on kube-proxy's).
const (
	chainFilterPrerouting = "filter-prerouting"
	chainFilterInput      = "filter-input"
	chainFilterForward    = "filter-forward"
	chainFilterOutput     = "filter-output"
	chainNATPrerouting    = "nat-prerouting"
	chainNATOutput        = "nat-output"
	chainNATPostrouting   = "nat-postrouting"
	chainFirewallCheck    = "firewall-check"
	chainEndpointsCheck   = "service-endpoints-check"
	chainServices         = "services"
	chainReject           = "reject-chain"

	mapServicePorts  = "service-ports"
	mapFirewallIPs   = "firewall-ips"
	mapNoEndpoints   = "no-endpoint-services"
	mapVIPSNAT       = "vip-snat"
	mapNodePorts     = "node-ports"
	mapProxyVIPs     = "proxy-vips"
	mapRoutedVIPs    = "routed-vips"
	mapHandOver      = "hand-over"
	maxReadableChars = 200 // of a service name in a chain name; nft allows 255
)

// serviceChainName names the chain that forwards one port of a service:
// "svc-<hash>-<namespace/name>/<proto>/<port>".
func serviceChainName(service string, p Port) string {
	suffix := fmt.Sprintf("%s/%d", p.Protocol.nft(), p.Port)
	return "svc-" + shortHash(service+"/"+suffix) + "-" + readable(service) + "/" + suffix
}

// bucketMapName names the map of a service port's buckets (proxy mode):
// "bkt-<hash>-<namespace/name>/<proto>/<port>".
func bucketMapName(service string, p Port) string {
	suffix := fmt.Sprintf("%s/%d", p.Protocol.nft(), p.Port)
	return "bkt-" + shortHash(service+"/"+suffix) + "-" + readable(service) + "/" + suffix
}

// groupBucketMapName names the bucket map a group's services share (proxy
// mode, addresses only: each service's rule adds its NodePort):
// "grp-<hash>-<group>".
func groupBucketMapName(group string) string {
	return "grp-" + shortHash(group) + "-" + readable(group)
}

// serviceSeed seeds the jhash of a passthrough service whose bucket map is
// its group's: the buckets are the same for every service of the group,
// the flows in each bucket differ.
func serviceSeed(service string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(service))
	return h.Sum32()
}

// groupChainName names the chain that forwards every port of protocol
// proto of a bucket group's services (proxy mode): "grp-<hash>-<group>/<proto>",
// with "/affinity" for those with ClientIP affinity.
func groupChainName(group string, proto Protocol, affinity bool) string {
	name := groupBucketMapName(group) + "/" + proto.nft()
	if affinity {
		name += "/affinity"
	}
	return name
}

// bucketMapTypeOf is the key of every bucket map. The key is a jhash
// result, but nft 1.0.6 crashes listing a map declared "typeof jhash …"
// and refuses "type mark" for it (datatype mismatch); numgen gives the
// same 32-bit integer type and lists fine.
const bucketMapTypeOf = "numgen inc mod 2"

// firewallChainName names the chain that drops clients outside a service's
// source ranges: "fw-<hash>-<namespace/name>".
func firewallChainName(service string) string {
	return "fw-" + shortHash(service) + "-" + readable(service)
}

// shortHash keeps names unique when readable() maps two names to one.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// readable keeps the characters nft accepts in an unquoted name and
// truncates, so that a chain name stays valid whatever the service name is.
func readable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxReadableChars {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '/', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
