package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundcloud/groundcloud/internal/sandbox"
)

// exampleService creates default/hello, waits for its address and until
// an HTTP request from this machine's shell gets through, and returns the
// address.
func exampleService(ctx context.Context, env *sandbox.Env, nodePort int32) (netip.Addr, error) {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: v1.ServiceSpec{
			Type:     v1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "hello"},
			Ports:    []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: nodePort}},
		},
	}
	if _, err := env.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return netip.Addr{}, fmt.Errorf("create the example Service: %w", err)
	}
	var vip netip.Addr
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := env.Client.CoreV1().Services("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, nil
		}
		vip, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err == nil, nil
	})
	if err != nil {
		return vip, fmt.Errorf("the example Service got no address (see the controller manager's log): %w", err)
	}
	progress("default/hello has address %s; waiting until it answers", vip)
	client := &http.Client{Timeout: 2 * time.Second}
	url := "http://" + netip.AddrPortFrom(vip, 80).String() + "/"
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return vip, fmt.Errorf("%s does not answer (see the agent's log): %w", url, err)
	}
	return vip, nil
}
