// Package configwatch keeps the current cloud-config: it re-reads the file
// when its content changes and swaps in the new configuration only when it
// parses and validates. A broken file leaves the last good configuration in
// place and logs every problem in it.
//
// Readers get a read-only *config.Config and must not modify it. The
// package does not decide what a change means; callers read Current() each
// time they need the configuration.
package configwatch
