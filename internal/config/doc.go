// Package config parses and validates groundcloud's cloud-config: the gcfg
// (INI-style) file the controller manager is given with --cloud-config. It
// describes the region, every machine the cluster may run on ([Machine]
// sections) and the address pools LoadBalancer Services draw from ([Pool]
// sections).
//
// The package owns:
//   - the syntax: gcfg's, read with gcfg's own scanner so that every
//     problem carries its line number;
//   - the meaning of every section and key, kept as one table (keys.go) that
//     both the decoder and the generated reference (docs/cloud-config.md)
//     are built from;
//   - validation, per value and across the file (e.g. overlapping pools).
//
// Parse reports every problem in a file at once, sorted by line, as an
// [Errors]; it never stops at the first one. ParsePartial reports the same
// problems but keeps the sections that have none, for a reader that uses
// only some sections (the agents) and must go on when another is wrong.
//
// The package must not:
//   - do I/O: it reads only the bytes it is given; opening the file, watching
//     it and logging are the caller's;
//   - talk to Kubernetes or to machines: it knows what a Node address or
//     label must look like, not what the cluster holds;
//   - be changed behind a caller's back: a *Config is read-only once Parse
//     returns it, and may be shared between goroutines that only read it.
package config
