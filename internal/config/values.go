package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/gcfg.v1/types"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// valueType is the syntax of a key's values: how one is parsed, and how the
// reference describes it.
type valueType[T any] struct {
	name  string // short name, used in the reference's key tables
	doc   string // what a value looks like, for the reference
	blank string // what a key written alone (no "= value") means; "" if that is an error
	parse func(string) (T, error)
}

var (
	boolValue = valueType[bool]{
		name:  "bool",
		doc:   "`true`, `yes`, `on` or `1`; `false`, `no`, `off` or `0`, in any case. A key written alone, without `= value`, means true.",
		blank: "true",
		parse: parseBool,
	}
	labelValue = valueType[string]{
		name:  "label value",
		doc:   "A non-empty Kubernetes label value: at most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.",
		parse: parseLabelValue,
	}
	ipAddress = valueType[netip.Addr]{
		name:  "IP address",
		doc:   "An IPv4 or IPv6 address, without a zone (`%eth0`); IPv4 in IPv4 form. IPv6 addresses are reported in canonical form (`fd00::1`).",
		parse: parseIP,
	}
	dnsName = valueType[string]{
		name:  "DNS name",
		doc:   "A lowercase DNS name (an RFC 1123 subdomain) such as `web-1.example.net`.",
		parse: dnsSubdomain("DNS name"),
	}
	nodeLabel = valueType[label]{
		name:  "label",
		doc:   "`key=value`: a Kubernetes label key (a name, optionally prefixed by a DNS subdomain and `/`) and a label value, which may be empty.",
		parse: parseLabel,
	}
	healthCheckKind = valueType[HealthCheckKind]{
		name:  "health check",
		doc:   "`http` or `tcp-node-port`, in any case.",
		parse: parseHealthCheckKind,
	}
	portValue = valueType[int32]{
		name:  "port",
		doc:   "A TCP port number, 1 to 65535.",
		parse: parsePort,
	}
	httpPath = valueType[string]{
		name:  "HTTP path",
		doc:   "An absolute HTTP path such as `/healthz`: starts with `/`, at most 256 printable ASCII characters without blanks.",
		parse: parseHTTPPath,
	}
	machineState = valueType[MachineState]{
		name:  "machine state",
		doc:   "`running`, `shutdown` or `gone`, in any case.",
		parse: parseMachineState,
	}
	forwarding = valueType[Forwarding]{
		name:  "forwarding",
		doc:   "`passthrough` or `proxy`, in any case.",
		parse: parseForwarding,
	}
	addressConflict = valueType[AddressConflict]{
		name:  "address conflict",
		doc:   "`keep` or `move`, in any case.",
		parse: parseAddressConflict,
	}
	addrRange = valueType[AddrRange]{
		name:  "address range",
		doc:   "A CIDR with no host bits set (`192.0.2.0/28`, `2001:db8::/120`) or an inclusive range `first-last` of one family (`192.0.2.10-192.0.2.20`).",
		parse: parsePoolRange,
	}
	namespaceName = valueType[string]{
		name:  "namespace",
		doc:   "A Kubernetes namespace name: an RFC 1123 label of at most 63 lowercase letters, digits and `-`.",
		parse: dnsLabel("namespace name"),
	}
)

var errEmpty = errors.New("must not be empty")

func parseBool(s string) (bool, error) {
	b, err := types.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%q is not a bool; use true, yes, on, 1, false, no, off or 0", s)
	}
	return b, nil
}

func parseLabelValue(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	return s, invalid(s, "label value", content.IsLabelValue(s))
}

func parseIP(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, errEmpty
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
	}
	return a, checkPlainAddr(a)
}

func dnsSubdomain(what string) func(string) (string, error) {
	return func(s string) (string, error) {
		if s == "" {
			return "", errEmpty
		}
		return s, invalid(s, what, content.IsDNS1123Subdomain(s))
	}
}

func dnsLabel(what string) func(string) (string, error) {
	return func(s string) (string, error) {
		if s == "" {
			return "", errEmpty
		}
		return s, invalid(s, what, content.IsDNS1123Label(s))
	}
}

// label is one Node label given as key=value.
type label struct{ key, value string }

func parseLabel(s string) (label, error) {
	k, v, ok := strings.Cut(s, "=")
	switch {
	case s == "":
		return label{}, errEmpty
	case !ok:
		return label{}, fmt.Errorf("%q is not key=value", s)
	}
	var msgs []string
	for _, err := range []error{
		invalid(k, "label key", content.IsLabelKey(k)),
		invalid(v, "label value", content.IsLabelValue(v)),
	} {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return label{}, errors.New(strings.Join(msgs, "; "))
	}
	return label{k, v}, nil
}

func parseHealthCheckKind(s string) (HealthCheckKind, error) {
	switch k := HealthCheckKind(strings.ToLower(s)); k {
	case HealthCheckHTTP, HealthCheckTCPNodePort:
		return k, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not a health check; use http or tcp-node-port", s)
}

func parsePort(s string) (int32, error) {
	if s == "" {
		return 0, errEmpty
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a port: use a number from 1 to 65535", s)
	}
	return int32(n), nil
}

func parseHTTPPath(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	if !strings.HasPrefix(s, "/") || len(s) > 256 || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return "", fmt.Errorf("%q is not an HTTP path: start it with / and use at most 256 printable ASCII characters without blanks", s)
	}
	return s, nil
}

func parseMachineState(s string) (MachineState, error) {
	switch st := MachineState(strings.ToLower(s)); st {
	case StateRunning, StateShutdown, StateGone:
		return st, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not a machine state; use running, shutdown or gone", s)
}

func parseForwarding(s string) (Forwarding, error) {
	switch f := Forwarding(strings.ToLower(s)); f {
	case ForwardingPassthrough, ForwardingProxy:
		return f, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not a forwarding mode; use passthrough or proxy", s)
}

func parseAddressConflict(s string) (AddressConflict, error) {
	switch c := AddressConflict(strings.ToLower(s)); c {
	case AddressConflictKeep, AddressConflictMove:
		return c, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not an address-conflict policy; use keep or move", s)
}

// invalid turns the messages of a k8s.io validation function into an error.
func invalid(value, what string, msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%q is not a valid %s: %s", value, what, strings.Join(msgs, "; "))
}
