package realcluster

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kube-proxy runs as kubeadm runs it: a DaemonSet on the host network of
// every node, privileged, with ServiceAccount kube-proxy bound to
// system:node-proxier and its configuration in ConfigMap kube-proxy.
const kubeProxyName = "kube-proxy"

// kubeProxyConfig is the KubeProxyConfiguration: nftables mode, the
// cluster's pod network (traffic from outside it to Services is
// masqueraded), and conntrack's table size left as the machine has it
// (maxPerCore 0): it is one of the settings no namespace has of its own;
// nodePortAddresses as Options.NodePortAddresses says.
func kubeProxyConfig(clusterCIDR string, nodePortAddresses []string) string {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clusterCIDR: %q
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
conntrack:
  maxPerCore: 0
`, clusterCIDR)
	if len(nodePortAddresses) > 0 {
		cfg += "nodePortAddresses:\n"
		for _, a := range nodePortAddresses {
			cfg += fmt.Sprintf("  - %q\n", a)
		}
	}
	return cfg
}

// kubeProxyKubeconfig reaches the apiserver at its endpoint with the Pod's
// ServiceAccount token: kube-proxy cannot use the kubernetes Service, which
// it programs itself.
func kubeProxyKubeconfig(server string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: default
  cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: %s
contexts:
- name: default
  context:
    cluster: default
    namespace: default
    user: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`, server)
}

// installKubeProxy creates kube-proxy's ServiceAccount, binding, ConfigMap
// and DaemonSet.
func (c *Cluster) installKubeProxy(ctx context.Context) error {
	const ns = metav1.NamespaceSystem
	objs := []func() error{
		func() error {
			_, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-proxier"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: kubeProxyName, Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName},
				Data: map[string]string{
					"config.conf":     kubeProxyConfig(c.Opts.ClusterCIDR, c.Opts.NodePortAddresses),
					"kubeconfig.conf": kubeProxyKubeconfig(c.apiserverURL()),
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.AppsV1().DaemonSets(ns).Create(ctx, kubeProxyDaemonSet(c.Images.KubeProxy.Ref), metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("install kube-proxy: %w", err)
		}
	}
	return nil
}

func kubeProxyDaemonSet(image string) *appsv1.DaemonSet {
	labels := map[string]string{"k8s-app": kubeProxyName}
	hostPathFileOrCreate := corev1.HostPathFileOrCreate
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: kubeProxyName, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: kubeProxyName,
					PriorityClassName:  "system-node-critical",
					HostNetwork:        true,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:            kubeProxyName,
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Command:         []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"},
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"},
						}}},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "kube-proxy", MountPath: "/var/lib/kube-proxy"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: kubeProxyName},
						}}},
						{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: "/run/xtables.lock", Type: &hostPathFileOrCreate,
						}}},
					},
				},
			},
		},
	}
}
