package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
)

func TestNewFromReader(t *testing.T) {
	if _, err := NewFromReader(nil, Options{}); err == nil || !strings.Contains(err.Error(), "--cloud-config") {
		t.Errorf("no cloud-config: %v, want an error naming --cloud-config", err)
	}
	_, err := NewFromReader(strings.NewReader("[Global]\nregion = x\nbogus = 1\n[Machine \"a\"]\nstate = melted\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), ":3:") || !strings.Contains(err.Error(), ":5:") {
		t.Errorf("broken cloud-config: %v, want both problems with their lines", err)
	}

	path := filepath.Join(t.TempDir(), "cloud.conf")
	if err := os.WriteFile(path, []byte("[Global]\nregion = home\n[Machine \"a\"]\nzone = z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := NewFromReader(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.ProviderName() != "groundcloud" || !c.HasClusterID() {
		t.Errorf("name %q, cluster ID %v", c.ProviderName(), c.HasClusterID())
	}
	if _, ok := c.Routes(); ok {
		t.Error("Routes supported before routes are built")
	}
	if _, ok := c.Instances(); ok {
		t.Error("Instances supported: InstancesV2 replaces it")
	}
	inst, ok := c.InstancesV2()
	if !ok {
		t.Fatal("InstancesV2 not supported")
	}
	md, err := inst.InstanceMetadata(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	if err != nil || md.ProviderID != "groundcloud://home/a" || md.Zone != "z" {
		t.Errorf("InstanceMetadata = %+v, %v", md, err)
	}

	// The file's path is kept: a change to it is picked up.
	if err := os.WriteFile(path, []byte("[Global]\nregion = home\n[Machine \"a\"]\nzone = y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !c.config.Check(context.Background()) {
		t.Fatal("changed file not reloaded")
	}
	md, _ = inst.InstanceMetadata(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	if md.Zone != "y" {
		t.Errorf("zone after reload = %q, want y", md.Zone)
	}

	lb, ok := c.LoadBalancer()
	if !ok {
		t.Fatal("LoadBalancer not supported")
	}
	_, err = lb.EnsureLoadBalancer(context.Background(), "k", &v1.Service{}, nil)
	var retry *api.RetryError
	if !errors.As(err, &retry) {
		t.Errorf("Ensure before Initialize = %v, want a RetryError", err)
	}
	// A node change is nothing for the provider to do, and it says so:
	// the service controller then records no Event and retries nothing.
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	if err := lb.UpdateLoadBalancer(context.Background(), "k", svc, []*v1.Node{{}}); !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Errorf("UpdateLoadBalancer = %v, want cloudprovider.ImplementedElsewhere", err)
	}
}
