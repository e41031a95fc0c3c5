package realcluster

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

func TestDNSAddresses(t *testing.T) {
	for _, tt := range []struct{ cidrs, want string }{
		{DefaultServiceCIDR, "10.96.0.10 fd00:10:96::a"},
		{"fd00:10:96::/112", "fd00:10:96::a"},
		{"10.96.0.0/16", "10.96.0.10"},
	} {
		got, err := dnsAddresses(tt.cidrs)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(addrStrings(got), " "); s != tt.want {
			t.Errorf("dnsAddresses(%s) = %s, want %s", tt.cidrs, s, tt.want)
		}
	}
}

func TestCoreDNSObjects(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::a")}
	doc, err := coreDNSObjects("localhost/groundcloud/coredns:abc", addrs)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()+"/"+o.GetName()] = true
		switch o.GetKind() {
		case "Service":
			ips := o.Object["spec"].(map[string]any)["clusterIPs"].([]any)
			if len(ips) != 2 || ips[0] != "10.96.0.10" || ips[1] != "fd00:10:96::a" {
				t.Errorf("kube-dns clusterIPs = %v", ips)
			}
			if p := o.Object["spec"].(map[string]any)["ipFamilyPolicy"]; p != "RequireDualStack" {
				t.Errorf("kube-dns ipFamilyPolicy = %v", p)
			}
		case "Deployment":
			if !strings.Contains(doc, "image: localhost/groundcloud/coredns:abc") {
				t.Error("Deployment does not run the image given")
			}
		}
	}
	for _, want := range []string{"ServiceAccount/coredns", "ClusterRole/system:coredns", "ClusterRoleBinding/system:coredns", "ConfigMap/coredns", "Deployment/coredns", "Service/kube-dns"} {
		if !kinds[want] {
			t.Errorf("no %s in the manifest", want)
		}
	}
}
