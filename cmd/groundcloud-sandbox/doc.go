// Command groundcloud-sandbox runs the sandbox (make demo): `up` builds what it
// needs, starts a whole groundcloud installation on this machine
// (a real cluster, test/framework/realcluster) with a link from the machine's shell into it, creates
// an example LoadBalancer Service, prints how to reach it and stays until
// Ctrl-C, then removes everything; `down` removes what a crashed `up` left.
//
// With --bgp it adds a router (FRR, test/framework/frr) that the load-balancer
// hosts peer with, a client host behind it and a Service of a pool
// announced over BGP, and prints the router's route and how to reach the
// address from the client.
//
// It must only ever remove what it created: namespaces with its prefix, its
// own root link, processes whose command line names its state directory,
// and the router directory that its state directory records.
package main
