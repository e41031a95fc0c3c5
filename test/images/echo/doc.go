// Package echo is the test application of the real cluster's Pods (image
// groundcloud-echo, built by the test bed): it tells every client which Pod
// on which Node answered and where the client seemed to come from, over
// HTTP and UDP, so that tests and the sandbox see where a connection
// through a load balancer ended up. Parse reads such an answer back;
// ?bytes=N pads an HTTP answer to N bytes for bulk-transfer benchmarks. A
// third listener speaks the line protocol of test/framework/availability's
// long-lived connections: a greeting naming the Pod and the client, then
// every line echoed with the Pod's name. POST /push?text=T makes the Pod
// speak first on the flows it holds: T on every open line connection and
// to every UDP peer whose datagram said "hold" (as a server that pushes
// does), for tests of what a node's packet meets after a takeover.
//
// It must not: read anything but its flags and environment; answer
// anything but what Answer says (padded when asked), the line echo and
// what a push asks for.
package echo
