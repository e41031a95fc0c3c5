package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// This file is the single description of what a cloud-config may contain.
// The decoder (decode.go) and the reference (reference.go, rendered into
// docs/cloud-config.md) are both driven by it.

type sectionKind int

const (
	globalSection sectionKind = iota
	machineSection
	poolSection
	bgpPeerSection
	routesSection
)

// sectionSpec describes one kind of section.
type sectionSpec struct {
	kind      sectionKind
	name      string             // canonical spelling; matched case-insensitively
	checkName func(string) error // nil: the section takes no name
	nameDoc   string
	doc       string
}

var sections = []sectionSpec{
	{
		kind: globalSection,
		name: "Global",
		doc:  "Settings for the whole cluster. Exactly one `[Global]` section is required.",
	},
	{
		kind:      machineSection,
		name:      KindMachine,
		checkName: nameCheck("machine name", content.IsDNS1123Subdomain),
		nameDoc:   "the machine's Node name, a lowercase RFC 1123 subdomain such as `web-1`",
		doc: "One machine the cluster may run on, named like its Node. What the cloud-node controllers " +
			"report for the Node comes from here; Node addresses are reported in the order they are written.",
	},
	{
		kind:      poolSection,
		name:      KindPool,
		checkName: nameCheck("pool name", content.IsDNS1123Label),
		nameDoc:   "the pool's name, an RFC 1123 label such as `public`",
		doc: "A set of addresses that LoadBalancer Services are given addresses from. " +
			"Pools are tried in the order they are written.",
	},
	{
		kind:      bgpPeerSection,
		name:      KindBGPPeer,
		checkName: nameCheck("peer name", content.IsDNS1123Label),
		nameDoc:   "the router's name, an RFC 1123 label such as `tor-a`",
		doc: "A router the load-balancer hosts open a BGP session with, to announce the addresses of the " +
			"`announce = bgp` pools. The agents read these sections from the same file (mount it in the agent " +
			"and give `--cloud-config`); the controller manager checks them. Every selected host peers with every " +
			"router; each host's router ID is its first IPv4 address of `--interface` unless `--bgp-router-id` says otherwise " +
			"([docs/bgp.md](bgp.md)). Read by agents at start: a change needs a restart of the agents. An agent leaves out a " +
			"section with a problem, or whose `password-file` it cannot read, keeps its other peers and reports it " +
			"([agent](agent.md#a-cloud-config-with-problems)).",
	},
	{
		kind: routesSection,
		name: "Routes",
		doc: "Pod routes without an overlay ([docs/routes.md](routes.md)). Without this section the provider " +
			"does not offer the Routes interface and the route controller does not start; with it, the controller " +
			"manager needs `--cluster-cidr`, and groundcloud-router programs the routes on nodes and gateways. " +
			"Read once at start: a change needs a restart of the controller manager.",
	},
}

// header is how the section is written: [Global], [Machine "name"].
func (s sectionSpec) header() string {
	if s.checkName == nil {
		return "[" + s.name + "]"
	}
	return "[" + s.name + ` "name"]`
}

func nameCheck(what string, check func(string) []string) func(string) error {
	return func(s string) error { return invalid(s, what, check(s)) }
}

// keySpec describes one key of a section.
type keySpec struct {
	section  sectionKind
	name     string // canonical spelling; matched case-insensitively
	multi    bool   // may be repeated; each line adds a value
	required bool
	dflt     string // value decoded when the key is absent; "" if none
	dfltDoc  string // the default as the reference states it, when it is not a literal value
	doc      string
	value    binding
}

// binding is a value type bound to the field a key's values are stored in.
type binding struct {
	typeName string
	typeDoc  string
	blank    string // what the key written alone means; "" if that is an error
	apply    func(t *target, raw string) error
}

func bind[T any](vt valueType[T], put func(*target, T) error) binding {
	return binding{
		typeName: vt.name,
		typeDoc:  vt.doc,
		blank:    vt.blank,
		apply: func(t *target, raw string) error {
			v, err := vt.parse(raw)
			if err != nil {
				return err
			}
			return put(t, v)
		},
	}
}

func assign[T any](vt valueType[T], field func(*target) *T) binding {
	return bind(vt, func(t *target, v T) error {
		*field(t) = v
		return nil
	})
}

// keys is every key: the ones below, bmcKeys (bmc.go), outOfServiceGlobalKeys
// (outofservice.go) and bgpKeys (bgp.go).
var keys = slices.Concat(baseKeys, bmcKeys, outOfServiceGlobalKeys, bgpKeys)

var baseKeys = []keySpec{
	{
		section: globalSection, name: "region", required: true,
		value: assign(labelValue, func(t *target) *string { return &t.global.Region }),
		doc: "Region the machines are in, reported as the `topology.kubernetes.io/region` label " +
			"of every Node whose `[Machine]` section gives no region of its own.",
	},
	{
		section: globalSection, name: "authoritative-inventory", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.global.AuthoritativeInventory }),
		doc: "Whether the `[Machine]` sections list every machine. If true and at least one machine is listed, " +
			"a Node that matches no `[Machine]` (by provider ID, then name) is not initialised and, once NotReady, " +
			"is reported as gone, so the node lifecycle controller deletes it at once. " +
			"If false, such Nodes initialise without labels and are never deleted.",
	},
	{
		section: globalSection, name: "cluster-health-check", dflt: string(HealthCheckHTTP),
		value: assign(healthCheckKind, func(t *target) *HealthCheckKind { return &t.global.ClusterHealthCheck.Kind }),
		doc: "How agents probe each node of a Service with `externalTrafficPolicy: Cluster`: `http`, an HTTP GET of " +
			"`cluster-health-check-port` and `cluster-health-check-path` (kube-proxy's `/healthz` by default), healthy on 200; " +
			"or `tcp-node-port`, a TCP connection to the Service's first TCP NodePort, healthy when accepted " +
			"(a Service with only UDP ports keeps `http`). Clusters without kube-proxy need one or the other: " +
			"[docs/install.md](install.md#clusters-without-kube-proxy). Services with `Local` are always probed on their `healthCheckNodePort`.",
	},
	{
		section: globalSection, name: "cluster-health-check-port", dflt: "10256",
		value: assign(portValue, func(t *target) *int32 { return &t.global.ClusterHealthCheck.Port }),
		doc:   "Port of the `http` cluster health check on every node; 10256 is kube-proxy's `--healthz-bind-address` port.",
	},
	{
		section: globalSection, name: "cluster-health-check-path", dflt: "/healthz",
		value: assign(httpPath, func(t *target) *string { return &t.global.ClusterHealthCheck.Path }),
		doc:   "Path of the `http` cluster health check.",
	},
	{
		section: globalSection, name: "allow-node-set-labels", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.global.AllowNodeSetLabels }),
		doc: "Whether the `hosts` selectors of pools and BGP peers may select on label keys that a Node's own kubelet " +
			"may set. If false, they may select only on keys under `node-restriction.kubernetes.io/` (or " +
			"`<domain>.node-restriction.kubernetes.io/`), which the NodeRestriction admission plugin keeps kubelets " +
			"from setting on their Nodes, so that a node cannot label itself into a pool or a router's sessions; " +
			"any other key is refused ([docs/bgp.md](bgp.md#which-hosts-hosts)). True accepts every key, as before; " +
			"for an upgrade, until the hosts are labelled anew.",
	},
	{
		section: machineSection, name: "zone",
		value: assign(labelValue, func(t *target) *string { return &t.machine.Zone }),
		doc:   "Zone (failure domain) the machine is in, reported as the `topology.kubernetes.io/zone` label. Without it the Node has no zone label.",
	},
	{
		section: machineSection, name: "region", dfltDoc: "`region` of `[Global]`",
		value: assign(labelValue, func(t *target) *string { return &t.machine.Region }),
		doc:   "Region the machine is in, reported as the `topology.kubernetes.io/region` label.",
	},
	{
		section: machineSection, name: "instance-type",
		value: assign(labelValue, func(t *target) *string { return &t.machine.InstanceType }),
		doc:   "Kind of machine, reported as the `node.kubernetes.io/instance-type` label. Without it the Node has no instance-type label.",
	},
	{
		section: machineSection, name: "internal-ip", multi: true,
		value: bind(ipAddress, addIP(corev1.NodeInternalIP)),
		doc:   "Address reachable from inside the cluster, reported as a Node address of type `InternalIP`.",
	},
	{
		section: machineSection, name: "external-ip", multi: true,
		value: bind(ipAddress, addIP(corev1.NodeExternalIP)),
		doc:   "Address reachable from outside the cluster, reported as a Node address of type `ExternalIP`.",
	},
	{
		section: machineSection, name: "hostname",
		value: bind(dnsName, addName(corev1.NodeHostName)),
		doc:   "Host name of the machine, reported as a Node address of type `Hostname`.",
	},
	{
		section: machineSection, name: "internal-dns", multi: true,
		value: bind(dnsName, addName(corev1.NodeInternalDNS)),
		doc:   "DNS name that resolves to an internal address, reported as a Node address of type `InternalDNS`.",
	},
	{
		section: machineSection, name: "external-dns", multi: true,
		value: bind(dnsName, addName(corev1.NodeExternalDNS)),
		doc:   "DNS name that resolves to an external address, reported as a Node address of type `ExternalDNS`.",
	},
	{
		section: machineSection, name: "label", multi: true,
		value: bind(nodeLabel, addLabel),
		doc: "Extra label the cloud-node controller puts on the Node. Keys under `kubernetes.io` and `k8s.io` " +
			"are refused: Kubernetes manages those itself, and the zone, region and instance-type labels " +
			"come from their own keys.",
	},
	{
		section: machineSection, name: "state", dflt: string(StateRunning),
		value: assign(machineState, func(t *target) *MachineState { return &t.machine.State }),
		doc: "What the cloud-node controllers are told: `running`; `shutdown` (the machine exists but is off, " +
			"so a NotReady Node is tainted `node.cloudprovider.kubernetes.io/shutdown`); or `gone` (the machine no longer exists, so a NotReady Node is deleted).",
	},
	{
		section: poolSection, name: "addresses", multi: true, required: true,
		value: bind(addrRange, addRange),
		doc: "Addresses the pool hands out. No address may be in two ranges, " +
			"whether of one pool or of two. A range may not contain an address no Service can be reached on: " +
			"the unspecified address (`0.0.0.0`, `::`), loopback (`127.0.0.0/8`, `::1`), link-local " +
			"(`169.254.0.0/16`, `fe80::/10`), multicast (`224.0.0.0/4`, `ff00::/8`), the broadcast address " +
			"`255.255.255.255`, or IPv4-mapped IPv6 (`::ffff:0:0/96`).",
	},
	{
		section: poolSection, name: "namespace", multi: true,
		value: bind(namespaceName, addNamespace),
		doc:   "Namespace whose Services may use the pool. Without any, Services of every namespace may.",
	},
	{
		section: poolSection, name: "auto-assign", dflt: "true",
		value: assign(boolValue, func(t *target) *bool { return &t.pool.AutoAssign }),
		doc: "Whether a Service that asks for no particular pool may get an address from this one; " +
			"the first such pool with a free address is used. If false, a Service must ask for the pool by name.",
	},
	{
		section: poolSection, name: "allow-cross-namespace-sharing", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.pool.AllowCrossNamespaceSharing }),
		doc: "Whether Services of different namespaces may share an address of this pool when they have the same " +
			"`groundcloud.io/allow-shared-ip` key. If false, a sharing key joins only Services of one namespace: " +
			"knowing another namespace's key is not enough to add a port to its address. Turning it off moves nothing: " +
			"Services that share an address across namespaces already keep it, but no other Service joins them " +
			"([annotations](annotations.md#groundcloudioallow-shared-ip)).",
	},
	{
		section: poolSection, name: "forwarding", dflt: string(ForwardingPassthrough),
		value: assign(forwarding, func(t *target) *Forwarding { return &t.pool.Forwarding }),
		doc: "How load-balancer hosts hand the traffic of the pool's addresses to nodes. `passthrough`: each packet goes " +
			"unchanged (client address kept) to a node on a link the host shares, whose kube-proxy serves the address " +
			"(Service status `ipMode: VIP`) and replies straight to the client; nodes must be on the host's subnet " +
			"([packet path](packet-path.md#passthrough-forwarding)). `proxy`: the host DNATs to a node's NodePort " +
			"and SNATs to the address, so nodes see the address as the client and replies cross the host " +
			"(`ipMode: Proxy`); works when nodes cannot reach clients directly. A Service may choose with the " +
			"`groundcloud.io/forwarding` annotation ([annotations](annotations.md#groundcloudioforwarding)).",
	},
	{
		section: poolSection, name: "address-conflict", dflt: string(AddressConflictKeep),
		value: assign(addressConflict, func(t *target) *AddressConflict { return &t.pool.AddressConflict }),
		doc: "What happens to a Service when the load-balancer hosts find its address in use on the link by a station " +
			"that is no load-balancer host ([addresses in use](high-availability.md#addresses-in-use-by-another-station)). " +
			"`keep`: it keeps the address, which is not announced while the station claims it, and the conflict is " +
			"reported (a Warning Event, a condition, a metric and an alert). `move`: a Service that did not ask for that " +
			"address is given a free address of the pool instead (an `AddressMoved` Event on the Service says from which " +
			"to which); one that asked for it keeps it as with `keep`. Either way no other Service is given the address.",
	},
	{
		section: routesSection, name: "enabled", dflt: "true",
		value: assign(boolValue, func(t *target) *bool { return &t.routes.Enabled }),
		doc: "Whether the provider offers the Routes interface: the route controller then writes a `Route` object " +
			"for each pod CIDR of each Node, routed to that Node's address. `false` keeps the section but turns pod routes off.",
	},
	{
		section: routesSection, name: "node-routers", dflt: "true",
		value: assign(boolValue, func(t *target) *bool { return &t.routes.NodeRouters }),
		doc: "Whether groundcloud-router runs on every Node (`deploy/router/`). Then a Node carries load-balancer " +
			"traffic only once its router reports the routes to the other Nodes' pods programmed (Node condition " +
			"`groundcloud.io/PodRoutes` True), so that a joining Node gets no connection it cannot forward yet. " +
			"`false` when only gateways run the router (`--placement=gateway`) and Nodes never report. Read by the " +
			"agents, with `enabled`; ignored when pod routes are off.",
	},
}

// target is what the entries of one section are decoded into.
type target struct {
	line    int // line of the entry being decoded
	global  *Global
	machine *Machine
	pool    *Pool
	routes  *Routes
	peer    *BGPPeer
	bmc     BMC // a machine's, kept only with bmc-url (checkBMC)

	firstLine map[string]int // line each value of a multi key was first given on
	ranges    []placedRange
	selectors []placedSelector
}

// once refuses a value given twice for one multi key.
func (t *target) once(key, value string) error {
	id := key + "\x00" + value
	if first, dup := t.firstLine[id]; dup {
		return fmt.Errorf("%s is already given on line %d", value, first)
	}
	t.firstLine[id] = t.line
	return nil
}

func addIP(typ corev1.NodeAddressType) func(*target, netip.Addr) error {
	return func(t *target, a netip.Addr) error { return addName(typ)(t, a.String()) }
}

func addName(typ corev1.NodeAddressType) func(*target, string) error {
	return func(t *target, addr string) error {
		if err := t.once(string(typ), addr); err != nil {
			return err
		}
		t.machine.Addresses = append(t.machine.Addresses, corev1.NodeAddress{Type: typ, Address: addr})
		return nil
	}
}

func addLabel(t *target, l label) error {
	if err := reservedLabel(l.key); err != nil {
		return err
	}
	if err := t.once("label", l.key); err != nil {
		return fmt.Errorf("label key %w", err)
	}
	if t.machine.Labels == nil {
		t.machine.Labels = map[string]string{}
	}
	t.machine.Labels[l.key] = l.value
	return nil
}

// cloudLabels are the Node labels the cloud-node controller sets from a
// machine's keys.
var cloudLabels = map[string]string{
	corev1.LabelTopologyZone:            "zone",
	corev1.LabelFailureDomainBetaZone:   "zone",
	corev1.LabelTopologyRegion:          "region",
	corev1.LabelFailureDomainBetaRegion: "region",
	corev1.LabelInstanceTypeStable:      "instance-type",
	corev1.LabelInstanceType:            "instance-type",
}

// reservedLabel refuses label keys in the domains Kubernetes keeps for itself.
func reservedLabel(key string) error {
	if k, ok := cloudLabels[key]; ok {
		return fmt.Errorf("label key %q is set by the cloud-node controller from this machine's %s key, "+
			"and a label here would be overwritten; set %s instead", key, k, k)
	}
	prefix, _, _ := strings.Cut(key, "/")
	if prefix == key {
		return nil
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return fmt.Errorf("label key %q is under %s, which Kubernetes reserves for labels its own "+
				"components set and may overwrite; use a key under a domain of your own", key, domain)
		}
	}
	return nil
}

func addRange(t *target, r AddrRange) error {
	t.pool.Ranges = append(t.pool.Ranges, r)
	t.ranges = append(t.ranges, placedRange{r: r, pool: t.pool.Name, line: t.line})
	return nil
}

func addNamespace(t *target, ns string) error {
	if err := t.once("namespace", ns); err != nil {
		return err
	}
	t.pool.Namespaces = append(t.pool.Namespaces, ns)
	return nil
}

func lookupSection(name string) (sectionSpec, bool) {
	for _, s := range sections {
		if strings.EqualFold(s.name, name) {
			return s, true
		}
	}
	return sectionSpec{}, false
}

func lookupKey(section sectionKind, name string) (keySpec, bool) {
	for _, k := range keys {
		if k.section == section && strings.EqualFold(k.name, name) {
			return k, true
		}
	}
	return keySpec{}, false
}

func keysOf(section sectionKind) []keySpec {
	var ks []keySpec
	for _, k := range keys {
		if k.section == section {
			ks = append(ks, k)
		}
	}
	return ks
}
