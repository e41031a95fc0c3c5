// Package bfd is single-hop Bidirectional Forwarding Detection (RFC 5880
// in asynchronous mode, over UDP as RFC 5881 says): the agent runs a
// session with each BGP router that asks for it, so that a dead link or
// host is noticed in a few hundred milliseconds instead of a BGP hold
// time, on both sides.
//
// session.go is the pure core: one session's state machine (Down, Init,
// Up, AdminDown), its timers (the slow 1 s interval until Up, then a Poll
// Sequence to the configured one; the detection time, the remote's
// multiplier times the larger of the two sides' intervals; 75 to 100 %
// jitter), fed packets and the time by its caller. packet.go reads and
// writes Control packets and makes RFC 5880's checks that need no
// session. runner.go is the thin shell that does the networking: one
// receiving socket per family on UDP port 3784, a sending socket per
// session on a source port from 49152 to 65535, TTL 255 on every packet
// sent and only packets with TTL 255 accepted (a packet that crossed a
// router is not from a neighbour), packets matched to a session by Your
// Discriminator and source address, and, when it stops, AdminDown sent to
// each neighbour: the router takes the session down without declaring a
// failure.
//
// Not implemented, and refused where a packet asks for them:
// authentication (a packet with the A bit is discarded), Demand mode (the
// agent never asks for it and ignores the D bit) and the Echo function
// (the agent advertises a Required Min Echo RX Interval of 0). Multihop
// BFD (RFC 5883) is not implemented: the config refuses bfd on a
// multihop peer.
//
// Why in-tree: GoBGP has no BFD, and no maintained Go library embeds as
// one (the Go BFD daemons found keep their implementation in internal
// packages, or depend on a whole router's packet layers). The protocol's
// asynchronous mode is small; the tests run it against FRR's bfdd.
//
// The package must not: send anywhere but to its configured neighbours,
// or act on a packet that failed a check.
package bfd
