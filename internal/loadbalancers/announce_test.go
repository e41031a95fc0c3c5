package loadbalancers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
)

func TestAnnounce(t *testing.T) {
	edge, err := labels.Parse("example.net/edge=true,zone in (a,b)")
	if err != nil {
		t.Fatal(err)
	}
	pref := uint32(200)
	lp := int64(200)
	for _, tt := range []struct {
		name string
		pool *config.Pool
		want *v1alpha1.Announce
	}{
		{"no pool", nil, nil},
		{"l2 by every host: absent, as old objects", &config.Pool{Announce: config.AnnounceL2, Hosts: labels.Everything()}, nil},
		{"l2 by some hosts", &config.Pool{Announce: config.AnnounceL2, Hosts: edge},
			&v1alpha1.Announce{Mode: v1alpha1.AnnounceL2, HostSelector: "example.net/edge=true,zone in (a,b)"}},
		{"bgp with attributes", &config.Pool{
			Announce: config.AnnounceBGP, Hosts: labels.Everything(),
			Communities: []config.Community{{ASN: 64512, Value: 100}}, LocalPreference: &pref,
		}, &v1alpha1.Announce{Mode: v1alpha1.AnnounceBGP, Communities: []string{"64512:100"}, LocalPreference: &lp}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Announce(tt.pool)); diff != "" {
				t.Errorf("Announce (-want +got):\n%s", diff)
			}
		})
	}
}
