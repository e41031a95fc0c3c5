package config

import (
	"fmt"
	"strings"
	"time"
)

// OutOfService is whether the controller manager taints the Node of a
// machine that its BMC says is off with node.kubernetes.io/out-of-service.
type OutOfService string

const (
	// OutOfServiceOff never taints.
	OutOfServiceOff OutOfService = "off"
	// OutOfServiceTaint taints a NotReady Node whose BMC has said Off for
	// the grace period, and removes that taint once the BMC says On and the
	// Node is Ready.
	OutOfServiceTaint OutOfService = "taint"
)

// DefaultOutOfServiceGrace is the default of bmc-out-of-service-grace.
const DefaultOutOfServiceGrace = 30 * time.Second

// Fence is whether the controller manager powers off, through its BMC, a
// machine whose Node has been NotReady for long while the BMC says On.
type Fence string

const (
	// FenceOff never powers a machine off.
	FenceOff Fence = "off"
	// FencePowerOff powers off (Redfish ForceOff) a machine whose Node has
	// been NotReady for bmc-fence-after while its BMC says On, so that its
	// Node can then be tainted out of service.
	FencePowerOff Fence = "power-off"
)

// DefaultFenceAfter is the default of bmc-fence-after.
const DefaultFenceAfter = 2 * time.Minute

var fenceValue = valueType[Fence]{
	name:  "fence mode",
	doc:   "`off` or `power-off`, in any case.",
	parse: parseFence,
}

func parseFence(s string) (Fence, error) {
	switch f := Fence(strings.ToLower(s)); f {
	case FenceOff, FencePowerOff:
		return f, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not a fence mode; use off or power-off", s)
}

var outOfServiceValue = valueType[OutOfService]{
	name:  "out-of-service mode",
	doc:   "`off` or `taint`, in any case.",
	parse: parseOutOfService,
}

func parseOutOfService(s string) (OutOfService, error) {
	switch o := OutOfService(strings.ToLower(s)); o {
	case OutOfServiceOff, OutOfServiceTaint:
		return o, nil
	}
	if s == "" {
		return "", errEmpty
	}
	return "", fmt.Errorf("%q is not an out-of-service mode; use off or taint", s)
}

// outOfServiceKeys are the keys of non-graceful shutdown from the BMC; the
// [Machine] key is checked with the bmc- keys (it needs bmc-url).
var outOfServiceGlobalKeys = []keySpec{
	{
		section: globalSection, name: "bmc-out-of-service", dflt: string(OutOfServiceOff),
		value: assign(outOfServiceValue, func(t *target) *OutOfService { return &t.global.BMCOutOfService }),
		doc: "Whether the controller manager applies the `node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` taint to the Node " +
			"of a machine with `bmc-url` when the Node is NotReady and the machine's BMC has said `PowerState` `Off` in every answer " +
			"for `bmc-out-of-service-grace` (`taint`), so that the upstream controllers force-delete its Pods and detach its volumes " +
			"(non-graceful node shutdown, KEP-2268); the taint is removed once the BMC says `On` and the Node is Ready. " +
			"`off` never taints. A `[Machine]` may say otherwise ([docs/controller-manager.md](controller-manager.md#non-graceful-shutdown-from-the-bmc)).",
	},
	{
		section: globalSection, name: "bmc-out-of-service-grace", dflt: DefaultOutOfServiceGrace.String(),
		value: assign(positiveSeconds, func(t *target) *time.Duration { return &t.global.BMCOutOfServiceGrace }),
		doc: "How long a machine's BMC must have said `Off`, in every fresh answer, before its NotReady Node is tainted out of service. " +
			"An answer `On`, an error, or no fresh answer starts the wait again.",
	},
	{
		section: globalSection, name: "bmc-metadata", dflt: "false",
		value: assign(boolValue, func(t *target) *bool { return &t.global.BMCMetadata }),
		doc: "Whether the controller manager writes what each machine's BMC says of it on its Node: the annotations " +
			"`groundcloud.io/bmc-model`, `groundcloud.io/bmc-serial-number` and `groundcloud.io/bmc-bios-version` (Redfish " +
			"`Model`, `SerialNumber`, `BiosVersion`; an annotation whose value the BMC stops giving is removed) and, for a machine " +
			"without `instance-type`, the `node.kubernetes.io/instance-type` label (and its beta twin) from `Model`, made a valid " +
			"label value (other characters become `-`, at most 63). A label someone else set is never changed. " +
			"`false` writes nothing and leaves what was written ([docs/controller-manager.md](controller-manager.md#machine-metadata-from-the-bmc)).",
	},
	{
		section: globalSection, name: "bmc-fence", dflt: string(FenceOff),
		value: assign(fenceValue, func(t *target) *Fence { return &t.global.BMCFence }),
		doc: "Fencing of machines whose Node is tainted out of service (`bmc-out-of-service = taint`) and that hang instead of dying: " +
			"`power-off` has the controller manager power off, through the BMC (Redfish `ComputerSystem.Reset`, `ForceOff`), a machine whose Node " +
			"has been NotReady for `bmc-fence-after` while its BMC says `On` in a fresh answer; once the BMC says `Off` for the grace, the Node is " +
			"tainted as for any machine that is off. A machine is never powered off while its Node is Ready, nor on a BMC's error or an old answer. " +
			"`off` never powers a machine off. A `[Machine]` may say otherwise ([docs/controller-manager.md](controller-manager.md#fencing)).",
	},
	{
		section: globalSection, name: "bmc-fence-after", dflt: DefaultFenceAfter.String(),
		value: assign(positiveSeconds, func(t *target) *time.Duration { return &t.global.BMCFenceAfter }),
		doc: "How long a Node must have been NotReady (since its Ready condition last changed) before its machine is fenced; " +
			"also the least time between two power-offs of one machine. Shorter moves a hung machine's workloads sooner; " +
			"longer leaves a machine whose kubelet or network only hiccups alone.",
	},
}

var outOfServiceMachineKey = keySpec{
	section: machineSection, name: "bmc-out-of-service", dfltDoc: "`bmc-out-of-service` of `[Global]`",
	value: assign(outOfServiceValue, func(t *target) *OutOfService { return &t.machine.OutOfService }),
	doc:   "`taint` or `off` for this machine, overriding `bmc-out-of-service` of `[Global]`. Needs `bmc-url`.",
}

var fenceMachineKey = keySpec{
	section: machineSection, name: "bmc-fence", dfltDoc: "`bmc-fence` of `[Global]`",
	value: assign(fenceValue, func(t *target) *Fence { return &t.machine.Fence }),
	doc:   "`power-off` or `off` for this machine, overriding `bmc-fence` of `[Global]`. Needs `bmc-url`, and acts only where the machine's `bmc-out-of-service` is `taint`.",
}

// FenceOf returns whether m may be powered off by fencing: the machine's
// own bmc-fence, else the [Global] one; always off where its Node is not
// tainted out of service (OutOfServiceOf) or it has no BMC.
func (c *Config) FenceOf(m *Machine) Fence {
	switch {
	case c.OutOfServiceOf(m) != OutOfServiceTaint:
		return FenceOff
	case m.Fence != "":
		return m.Fence
	case c.Global.BMCFence != "":
		return c.Global.BMCFence
	}
	return FenceOff
}

// OutOfServiceOf returns whether m's Node may be tainted out of service:
// the machine's own bmc-out-of-service, else the [Global] one; always off
// without a BMC.
func (c *Config) OutOfServiceOf(m *Machine) OutOfService {
	switch {
	case m == nil || m.BMC == nil:
		return OutOfServiceOff
	case m.OutOfService != "":
		return m.OutOfService
	case c.Global.BMCOutOfService != "":
		return c.Global.BMCOutOfService
	}
	return OutOfServiceOff
}
