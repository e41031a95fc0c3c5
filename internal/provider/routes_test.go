package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/groundcloud/groundcloud/internal/cloudroutes"
	"github.com/groundcloud/groundcloud/internal/routeapi"
)

func TestRoutes(t *testing.T) {
	off, err := NewFromReader(strings.NewReader("[Global]\nregion = home\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := off.Routes(); ok {
		t.Error("Routes supported without a [Routes] section: the controller manager would need --cluster-cidr")
	}
	disabled, err := NewFromReader(strings.NewReader("[Global]\nregion = home\n[Routes]\nenabled = false\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := disabled.Routes(); ok {
		t.Error("Routes supported with enabled = false")
	}

	c, err := NewFromReader(strings.NewReader("[Global]\nregion = home\n[Machine \"node-1\"]\ninternal-ip = 192.0.2.11\n[Routes]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := c.Routes()
	if !ok {
		t.Fatal("Routes not supported with a [Routes] section")
	}
	ctx := context.Background()
	var retry *api.RetryError
	if _, err := r.ListRoutes(ctx, "kubernetes"); !errors.As(err, &retry) {
		t.Errorf("ListRoutes before Initialize = %v, want a RetryError", err)
	}

	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{routeapi.Resource: "RouteList"})
	c.routes.Store(cloudroutes.NewManager(dyn, c.config.Current))
	route := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24",
		TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.11"}}}
	if err := r.CreateRoute(ctx, "kubernetes", "uid-1", route); err != nil {
		t.Fatal(err)
	}
	list, err := r.ListRoutes(ctx, "kubernetes")
	if err != nil || len(list) != 1 || list[0].TargetNode != "node-1" || list[0].Name != "node-1.10-244-1-0-24" {
		t.Fatalf("ListRoutes = %+v, %v", list, err)
	}
	if err := r.DeleteRoute(ctx, "kubernetes", list[0]); err != nil {
		t.Fatal(err)
	}
	if list, _ := r.ListRoutes(ctx, "kubernetes"); len(list) != 0 {
		t.Errorf("after DeleteRoute: %+v", list)
	}
}
