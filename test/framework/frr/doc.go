// Package frr runs a real BGP router, FRR's zebra, bfdd and bgpd from the
// machine's FRR package, inside a lab host (test/framework/netlab), for the tests, the sandbox
// and the benchmarks that need one to peer with the agents over BGP (and
// BFD).
//
// It owns: the router's configuration, pid files, vty and zebra sockets
// and logs, all in a directory of the caller's (never /etc/frr or
// /var/run/frr, so the machine's own FRR, if any, is untouched), the
// processes (started in the host's network namespace through netlab, so they
// die with the lab), and reading the router's state with vtysh.
//
// It must not: change anything outside the host's network namespace and
// its directory; start FRR's watchfrr or init scripts, which act on the
// machine's FRR.
package frr
