package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// EchoPorts are where groundcloud-echo listens in its Pods.
const (
	EchoHTTPPort  = 8080
	EchoUDPPort   = 8081
	EchoLinesPort = 8082 // TCP: a greeting, then every line echoed (test/framework/availability)
)

// EchoDeployment is a Deployment of groundcloud-echo (labels app=name),
// each Pod answering with its name and its Node's.
func (c *Cluster) EchoDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:            "echo",
						Image:           c.Images.Echo.Ref,
						ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: fromField("metadata.name")},
							{Name: "NODE_NAME", ValueFrom: fromField("spec.nodeName")},
						},
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: EchoHTTPPort, Protocol: corev1.ProtocolTCP},
							{Name: "udp", ContainerPort: EchoUDPPort, Protocol: corev1.ProtocolUDP},
							{Name: "lines", ContainerPort: EchoLinesPort, Protocol: corev1.ProtocolTCP},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(EchoHTTPPort)}},
							PeriodSeconds: 2,
						},
					}},
				},
			},
		},
	}
}

// EchoStatefulSet is a StatefulSet of one groundcloud-echo Pod (labels
// app=name, Pod <name>-0) that prefers node prefer, without volumes: what
// a StatefulSet guarantees (at most one Pod of an identity at a time) is
// what keeps it from starting elsewhere while a node is unreachable.
func (c *Cluster) EchoStatefulSet(namespace, name, prefer string) *appsv1.StatefulSet {
	d := c.EchoDeployment(namespace, name, 1)
	tmpl := d.Spec.Template
	tmpl.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{prefer}}},
		}}},
	}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: d.Labels},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: d.Spec.Selector, Template: tmpl, ServiceName: name},
	}
}

// WaitPodRunning waits until Pod namespace/name is Running and ready, on
// node when node is not empty, and returns its node.
func (c *Cluster) WaitPodRunning(ctx context.Context, namespace, name, node string) (string, error) {
	var on string
	err := c.poll(ctx, "Pod "+namespace+"/"+name+" running", func(ctx context.Context) (string, error) {
		p, err := c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error(), nil
		}
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || (node != "" && p.Spec.NodeName != node) {
			return fmt.Sprintf("%s on %q, deleting %v", p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil), nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				on = p.Spec.NodeName
				return "", nil
			}
		}
		return "not ready on " + p.Spec.NodeName, nil
	})
	return on, err
}

// LoadBalancerService is a Service of type LoadBalancer in front of the
// Pods labelled app=name, port 80 to their HTTP port.
func LoadBalancerService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(EchoHTTPPort)},
			},
		},
	}
}

// WaitDeploymentReady waits until every replica of a Deployment is ready.
func (c *Cluster) WaitDeploymentReady(ctx context.Context, namespace, name string) error {
	return c.poll(ctx, "Deployment "+namespace+"/"+name+" ready", func(ctx context.Context) (string, error) {
		d, err := c.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if d.Spec.Replicas == nil || d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			return fmt.Sprintf("%d of %d ready", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1)), nil
		}
		return "", nil
	})
}

// WaitLoadBalancerIP waits for a Service's first load-balancer address.
func (c *Cluster) WaitLoadBalancerIP(ctx context.Context, namespace, name string) (netip.Addr, error) {
	var vip netip.Addr
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := c.Client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, nil
		}
		vip, err = netip.ParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		return err == nil, nil
	})
	if err != nil {
		return vip, fmt.Errorf("Service %s/%s got no address: %w", namespace, name, err)
	}
	return vip, nil
}

// ExampleManifest is EchoDeployment and LoadBalancerService as the YAML a
// user would write and `kubectl apply -f`. The Service has
// externalTrafficPolicy Local: with passthrough forwarding (the default)
// its Pods then see, and answer with, the client's own address.
func (c *Cluster) ExampleManifest(namespace, name string, replicas int32) (string, error) {
	d := c.EchoDeployment(namespace, name, replicas)
	// One Pod per node where Pods may run (the scheduler's own spreading
	// is only a preference), so that the example answers from every
	// worker.
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		LabelSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
	}}
	s := LoadBalancerService(namespace, name)
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	return Manifest(d, s)
}

// Manifest is objects as the YAML documents a user would write and
// `kubectl apply -f`: apiVersion and kind filled in, no status, no empty
// fields.
func Manifest(objects ...runtime.Object) (string, error) {
	var docs []string
	for _, obj := range objects {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return "", err
		}
		obj = obj.DeepCopyObject()
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
		data, err := json.Marshal(obj)
		if err != nil {
			return "", err
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			return "", err
		}
		// What the apiserver fills in, not what a user writes.
		delete(m, "status")
		pruneEmpty(m)
		out, err := yaml.Marshal(m)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(out))
	}
	return strings.Join(docs, "---\n"), nil
}

// pruneEmpty removes null values and empty maps, recursively.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneEmpty(v)
			if len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					pruneEmpty(em)
				}
			}
		}
	}
}

// PodContainer finds the running Pod of namespace matching selector on
// node, and returns it with the ID of its first container.
func (c *Cluster) PodContainer(ctx context.Context, namespace, selector, node string) (*corev1.Pod, string, error) {
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].ContainerID != "" {
			return p, p.Status.ContainerStatuses[0].ContainerID, nil
		}
	}
	return nil, "", fmt.Errorf("no running Pod %s in %s on %s", selector, namespace, node)
}

// AgentContainer is the groundcloud-agent Pod on a load-balancer host and
// its container's ID (see Node.KillContainer).
func (c *Cluster) AgentContainer(ctx context.Context, node string) (*corev1.Pod, string, error) {
	return c.PodContainer(ctx, metav1.NamespaceSystem, "app.kubernetes.io/name=groundcloud-agent", node)
}
