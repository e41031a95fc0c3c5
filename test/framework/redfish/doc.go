// Package redfish runs a real Redfish BMC, the emulator of OpenStack's
// sushy-tools (vendored under third_party/sushy-tools, with a small
// patch), inside a lab host (test/framework/netlab), for the tests, the sandbox and the
// benchmarks that need machines whose power a BMC reports and controls.
//
// It owns: the emulator's configuration (its fake systems driver with one
// Redfish system per test machine), its state directory, the htpasswd file
// of its basic authentication and the certificate authority and server
// certificate of its TLS, all in a directory of the caller's; the emulator's
// process (started in the host's network namespace through netlab, so it
// dies with the lab); and reading and setting a system's power through the
// emulator's own Redfish API.
//
// It must not: change anything outside the host's network namespace and its
// directory; need anything but Debian's Python and the libraries
// hack/install-deps.sh installs.
package redfish
