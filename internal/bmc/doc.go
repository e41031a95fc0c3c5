// Package bmc asks each machine's baseboard management controller for the
// machine's power state over Redfish, in the background, and keeps the
// answers for the provider to read.
//
// It owns: one poll loop per machine with a [Machine] bmc-url (started,
// changed and stopped as the cloud-config changes), the Redfish client
// (gofish) with the machine's TLS settings and credentials read from their
// files at each poll, the cache of answers with their times, and the
// groundcloud_bmc_* metrics.
//
// It must not: block a caller on a BMC (Status reads the cache only);
// turn an error, a timeout or an old answer into "off" (an unknown power
// state is reported as unknown); log or keep the credentials; change a
// machine's power (it only reads).
package bmc
