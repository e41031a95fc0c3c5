package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/controller-manager/pkg/clientbuilder"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/provider"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// TestStaleUpdateAssignsNothing drives the provider in this process
// against a real apiserver as the service controller does when its node
// sync races a Service change: the node sync calls UpdateLoadBalancer with
// the Service as it was before it stopped being of type LoadBalancer and
// was cleaned up. That call must neither assign an address nor write a
// LoadBalancer (which, owned by a live ClusterIP Service, would never be
// collected).
func TestStaleUpdateAssignsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: runs etcd and kube-apiserver")
	}
	ctx := t.Context()
	cp := controlplane.StartT(t, controlplane.Options{})
	client := cp.Client()
	cloud, err := provider.NewFromReader(strings.NewReader("[Global]\nregion = lab\n\n[Pool \"default\"]\naddresses = 192.0.2.200-192.0.2.209\n"), provider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cloud.Initialize(clientbuilder.SimpleControllerClientBuilder{ClientConfig: cp.RESTConfig()}, ctx.Done())
	factory := informers.NewSharedInformerFactory(client, 0)
	if user, ok := any(cloud).(cloudprovider.InformerUser); ok {
		user.SetInformers(factory)
	}
	factory.Start(ctx.Done())
	lbs, _ := cloud.LoadBalancer()

	svcs := client.CoreV1().Services("default")
	web, err := svcs.Create(ctx, newService("web", withPort(v1.ProtocolTCP, 80, 30080), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.205")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := ensureRetrying(t, lbs, web)
	if len(st.Ingress) != 1 || st.Ingress[0].IP != "192.0.2.205" {
		t.Fatalf("web got %+v, want 192.0.2.205", st)
	}
	stale := web.DeepCopy()

	// The Service becomes ClusterIP; the service controller cleans up.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Type = v1.ServiceTypeClusterIP
		cur.Spec.ExternalTrafficPolicy = ""
		cur.Spec.AllocateLoadBalancerNodePorts = nil
		for i := range cur.Spec.Ports {
			cur.Spec.Ports[i].NodePort = 0
		}
		_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := lbs.EnsureLoadBalancerDeleted(ctx, "", stale); err != nil {
		t.Fatal(err)
	}
	lbClient, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "LoadBalancer web deleted", func() bool { return !lbExists(t, lbClient, "web") })

	// The node sync, with its snapshot from before. Node changes reach the
	// agents without the provider (they watch the Nodes), so Update says
	// so: upstream then writes and records nothing.
	if err := lbs.UpdateLoadBalancer(ctx, "", stale, nil); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
		t.Fatal(err)
	}
	// Nothing is written for the stale snapshot: not now, and not by a
	// refresh queued for it.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if lbExists(t, lbClient, "web") {
			t.Fatal("a stale UpdateLoadBalancer wrote a LoadBalancer for a ClusterIP Service")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, exists, err := lbs.GetLoadBalancer(ctx, "", stale); err != nil || exists {
		t.Errorf("GetLoadBalancer after the stale update = %v, %v; want none", exists, err)
	}
	// Its address is free.
	other, err := svcs.Create(ctx, newService("other", withPort(v1.ProtocolTCP, 80, 30081), withAnnotation(annotation.LoadBalancerIPs, "192.0.2.205")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := ensureRetrying(t, lbs, other); st.Ingress[0].IP != "192.0.2.205" {
		t.Errorf("other got %+v, want the freed 192.0.2.205", st)
	}
}

// ensureRetrying calls EnsureLoadBalancer until the provider is ready.
func ensureRetrying(t *testing.T, lbs cloudprovider.LoadBalancer, svc *v1.Service) *v1.LoadBalancerStatus {
	t.Helper()
	var st *v1.LoadBalancerStatus
	var last error
	eventually(t, "EnsureLoadBalancer "+svc.Name, func() bool {
		var err error
		st, err = lbs.EnsureLoadBalancer(context.Background(), "", svc, nil)
		var retryErr *api.RetryError
		if errors.As(err, &retryErr) {
			return false
		}
		if err != nil {
			last = err
		}
		return true
	})
	if last != nil {
		t.Fatalf("EnsureLoadBalancer %s: %v", svc.Name, last)
	}
	return st
}
