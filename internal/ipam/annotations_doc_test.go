package ipam

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
)

// TestAnnotationsDocumented checks docs/annotations.md against the
// annotations the controller manager reads (this package's and the
// forwarding one of internal/loadbalancers): each has a section, and the doc names no
// other groundcloud.io annotation.
func TestAnnotationsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/annotations.md")
	if err != nil {
		t.Fatal(err)
	}
	code := []string{AnnotationPool, AnnotationLoadBalancerIPs, AnnotationAllowSharedIP, v1alpha1.AnnotationForwarding}
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^## (groundcloud\.io/\S+)$`).FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1]))
	}
	slices.Sort(code)
	slices.Sort(documented)
	if !slices.Equal(code, documented) {
		t.Errorf("docs/annotations.md documents %v; the code reads %v", documented, code)
	}
}
