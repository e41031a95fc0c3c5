package loadbalancers

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/deploy/crds"
)

// TestLimitsMatchTheCRD reads the maxItems of the installed schema.
func TestLimitsMatchTheCRD(t *testing.T) {
	data, err := crds.FS.ReadFile("groundcloud.io_loadbalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties map[string]struct {
									MaxItems int `json:"maxItems"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties
	for field, want := range map[string]int{"ports": MaxPorts, "sourceRanges": MaxSourceRanges} {
		if got := props[field].MaxItems; got != want {
			t.Errorf("spec.%s maxItems = %d in the CRD, %d in the code", field, got, want)
		}
	}
}
