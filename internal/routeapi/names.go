package routeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ObjectName is the name of the Route object for a node's pod CIDR:
// "<node>.<cidr>" with the CIDR's '.', ':' and '/' written as '-'
// ("node-1.10-244-1-0-24", "node-1.fd00-10-244-1---64"). The name is
// deterministic, so that two writers of the same route meet on one object,
// and distinct for distinct (node, CIDR) pairs: the CIDR part has no '.',
// and no IPv6 form encodes like an IPv4 one. A name that would not be a
// valid object name (too long) is "route-" and a hash of both instead.
func ObjectName(node string, cidr netip.Prefix) string {
	enc := strings.NewReplacer(".", "-", ":", "-", "/", "-").Replace(cidr.String())
	name := node + "." + enc
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(node + "\x00" + cidr.String()))
	return "route-" + hex.EncodeToString(sum[:10])
}
