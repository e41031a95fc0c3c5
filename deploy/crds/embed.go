// Package crds embeds groundcloud's CustomResourceDefinitions so that the
// controller manager can install or upgrade them at start.
package crds

import "embed"

// FS holds the generated CRD manifests (*.yaml).
//
//go:embed *.yaml
var FS embed.FS
