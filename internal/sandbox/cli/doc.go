// Package cli is the groundcloud-sandbox command: `up` builds what it
// needs, starts a whole groundcloud installation on this machine
// (internal/sandbox) with a link from the machine's shell into it, creates
// an example LoadBalancer Service, prints how to reach it and stays until
// Ctrl-C, then removes everything; `down` removes what a crashed `up` left.
//
// It must only ever remove what it created: namespaces with its prefix, its
// own root link, and processes whose command line names its state directory.
package cli
