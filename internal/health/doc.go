// Package health probes the nodes behind the agent's load balancers and
// decides which of them may receive new flows.
//
// A Target is one HTTP endpoint of one node (address, port, path): kube-proxy's
// :10256/healthz for Services with externalTrafficPolicy Cluster, the Service's
// healthCheckNodePort for Local. Many LoadBalancers share targets; the Checker
// probes each distinct target once per interval, whoever asked for it.
//
// It owns: the set of targets (SetTargets), the probing schedule (Run: a new
// target's first probe at once, its second a jittered interval later, then one
// per interval, a bounded number in flight),
// each target's up/down state with its thresholds (status), and the health
// metrics. A target is healthy on HTTP 200 only; anything else - another status,
// a redirect, a refused connection, a timeout - is a failure.
//
// New targets start Unknown and are probed at once, in parallel (up to
// Concurrency, each bounded by Timeout); the first result decides, and only
// later results go through the thresholds. One exception: a refused
// connection within one interval of the first probe leaves the target
// Unknown and it is probed again an eighth of an interval later. A
// healthCheckNodePort refuses until kube-proxy has synced its Service, so
// for a Service just created or switched to Local a refusal says kube-proxy
// is late, not that the node has no ready Pod (which kube-proxy answers
// with 503). The caller decides what Unknown
// means for traffic; the agent waits for the first probes (WaitProbed, one
// interval at most) before it programs a new target, so that a new Service,
// a Service switched to externalTrafficPolicy Local and a restarted agent
// never send new flows to a node before a probe said it may have them. A
// target the Checker does not know is Unknown too.
//
// It must not: decide what to do when every backend is down (the data plane
// does), probe anything but the targets it is given, keep connections to a node
// open between probes (a dead node must look dead), or call onChange under a
// lock or from more than one goroutine at a time.
package health
