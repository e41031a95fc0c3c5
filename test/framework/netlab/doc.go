// Package netlab builds simulated hosts out of Linux network namespaces: one
// "switch" namespace holding a bridge, and one namespace per host joined to
// the bridge by a veth pair, with an IPv4 and an IPv6 address from the lab's
// subnets. Both test beds (test/framework/apionly and
// test/framework/realcluster) build their hosts through it, from one
// Topology.
//
// It owns: creating and deleting the namespaces, links, addresses and
// sysctls of a lab; running code (Host.Do) and commands (Host.Command,
// Host.Nsenter, Host.Start, Host.StartCmd) inside a host; relaying TCP from
// a host to the root namespace's loopback (Host.Forward); the lifetime of
// the processes it starts; and
// sweeping namespaces left behind by a crashed run (Sweep, SweepStale).
//
// It must not: touch the root namespace's addresses, routes, links, sysctls
// or ruleset (links are created by netlink sockets opened inside the switch
// namespace and moved straight into the host's, never passing through the
// root namespace); send traffic anywhere but to addresses of its own hosts;
// leave a namespace or a process behind after Close. A route from the root
// namespace into a lab (for the sandbox) is deliberately not here yet: it
// would be the one exception to the first rule and belongs in a method of its
// own (see Lab.Gateway4).
//
// Every namespace is named "<prefix>-<host>", the bridge's "<prefix>-switch".
// Prefixes made by RunPrefix carry the creating process's pid, so SweepStale
// can delete the labs of runs that no longer exist without touching a lab
// that another test binary is still using.
//
// Go and namespaces: a namespace belongs to an OS thread, not a goroutine.
// Do runs its function on a fresh goroutine locked to a thread switched into
// the namespace; sockets created there stay in the namespace for their whole
// life and may be used from any goroutine afterwards, but goroutines started
// inside the function run in the root namespace. Processes are started from
// one long-lived locked thread per lab, because Pdeathsig fires when the
// thread that forked the child exits, not when the process does.
package netlab
