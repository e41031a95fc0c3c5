// Package availability measures, from inside a lab (test/framework/netlab), how a
// load-balanced service holds up while load-balancer hosts fail: Client
// opens a new TCP connection to a virtual IP every few milliseconds and
// pings long-lived ones through it (nodesim, and groundcloud-echo on its
// lines port, echo each line), Holders
// records which hosts hold each virtual IP over time, and Measure turns the
// attempts around a fault into the outage a client saw. The failover
// checks of the real cluster's tests (test/cluster) and the failover
// benchmarks share it.
//
// It only opens connections from lab hosts and reads their addresses; it
// changes nothing.
package availability
