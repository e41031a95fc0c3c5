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
}

var outOfServiceMachineKey = keySpec{
	section: machineSection, name: "bmc-out-of-service", dfltDoc: "`bmc-out-of-service` of `[Global]`",
	value: assign(outOfServiceValue, func(t *target) *OutOfService { return &t.machine.OutOfService }),
	doc:   "`taint` or `off` for this machine, overriding `bmc-out-of-service` of `[Global]`. Needs `bmc-url`.",
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
