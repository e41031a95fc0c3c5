// Package inventory answers the questions the upstream cloud-node and
// cloud-node-lifecycle controllers ask about a Node — which machine is it,
// does that machine still exist, is it shut down, what are its addresses and
// labels — from the machines declared in the cloud-config.
//
// It is pure: it reads a *config.Config and a *v1.Node and does no I/O. It
// must never report a machine as gone unless the inventory says so
// definitively, because upstream deletes the Node at once.
package inventory
