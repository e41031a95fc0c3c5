// Package outofservice applies the node.kubernetes.io/out-of-service taint
// (non-graceful node shutdown, KEP-2268) to the Node of a machine whose BMC
// has said PowerState Off, in every answer, for a grace period while the
// Node is NotReady; and removes that taint once the BMC says On and the
// Node is Ready. Only machines with bmc-out-of-service = taint are served.
// For every Node whose machine has a BMC it also writes the Node condition
// ConditionBMC (condition.go): whether the BMC answers, and why not.
//
// plan.go decides from what is observed and does no I/O; controller.go reads
// the Node cache and the BMC poller's cache and writes the Nodes. It never
// asks a BMC itself, never powers a machine off (no fencing), and never
// removes a taint it did not apply: a taint it applies is marked with the
// annotation MarkAnnotation.
package outofservice
