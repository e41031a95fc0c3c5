package realcluster

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"net/netip"
	"strings"
	"text/template"

	"github.com/groundcloud/groundcloud/test/framework/manifests"
)

// ClusterDomain is the cluster's DNS domain, as kubelets and CoreDNS know it.
const ClusterDomain = "cluster.local"

//go:embed coredns.yaml
var coreDNSManifest string

var coreDNSTemplate = template.Must(template.New("coredns.yaml").Parse(coreDNSManifest))

// dnsAddresses are the kube-dns Service's addresses, one per family of the
// service CIDRs: the tenth of each, as kubeadm picks it.
func dnsAddresses(serviceCIDR string) ([]netip.Addr, error) {
	cidrs, err := parseCIDRs("ServiceCIDR", serviceCIDR)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, c := range cidrs {
		a := c.Addr()
		for range 10 {
			a = a.Next()
		}
		out = append(out, a)
	}
	return out, nil
}

// coreDNSObjects renders the cluster DNS manifest for image and the
// kube-dns Service's addresses.
func coreDNSObjects(image string, addrs []netip.Addr) (string, error) {
	ips := make([]string, len(addrs))
	for i, a := range addrs {
		ips[i] = a.String()
	}
	policy := "SingleStack"
	if len(addrs) == 2 {
		policy = "RequireDualStack"
	}
	var b bytes.Buffer
	err := coreDNSTemplate.Execute(&b, struct{ Image, FamilyPolicy, ClusterIP, ClusterIPs string }{image, policy, ips[0], strings.Join(ips, ", ")})
	return b.String(), err
}

// installCoreDNS installs cluster DNS (see coredns.yaml), which every
// kubelet names in its clusterDNS.
func (c *Cluster) installCoreDNS(ctx context.Context) error {
	addrs, err := dnsAddresses(c.Opts.ServiceCIDR)
	if err != nil {
		return err
	}
	doc, err := coreDNSObjects(c.Images.CoreDNS.Ref, addrs)
	if err != nil {
		return err
	}
	objs, err := manifests.Parse([]byte(doc))
	if err != nil {
		return fmt.Errorf("cluster DNS manifest: %w", err)
	}
	if err := manifests.ApplyWithConfig(ctx, c.CP.RESTConfig(), objs, installFieldManager); err != nil {
		return fmt.Errorf("install cluster DNS: %w", err)
	}
	c.logf("installed cluster DNS (CoreDNS) at %v", addrs)
	return nil
}
