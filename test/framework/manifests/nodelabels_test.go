package manifests

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/groundcloud/groundcloud/internal/annotation"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// TestNodesCannotLabelThemselvesIn: a node's kubelet (user
// system:node:<name> in group system:nodes, under the Node authorizer and
// the NodeRestriction admission plugin, as a cluster should run) cannot
// make the agent's DaemonSet select its Node — registering with the
// nodeSelector's labels or adding them later, to its own Node or another —
// nor label itself into a hosts selector the cloud-config accepts, nor take
// off such labels or the dedicated hosts' taint once an administrator set
// them. A label of the kubelet's own domain it may set: the refusals are
// NodeRestriction's, not a lack of rights.
func TestNodesCannotLabelThemselvesIn(t *testing.T) {
	ds := object[appsv1.DaemonSet](t, renderDeploy(t), "DaemonSet", "groundcloud-agent")
	selector := ds.Spec.Template.Spec.NodeSelector
	const name, other = "lb-1", "lb-2"
	user := "system:node:" + name
	cp := controlplane.StartT(t, controlplane.Options{Users: []controlplane.User{{Name: user, Groups: []string{"system:nodes"}}}})
	rc, err := cp.RESTConfigFor(user)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, admin := kubernetes.NewForConfigOrDie(rc).CoreV1().Nodes(), cp.Client().CoreV1().Nodes()
	ctx := t.Context()
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want Forbidden", what, err)
			return
		}
		t.Logf("%s: refused: %v", what, err)
	}

	// Registration: with the DaemonSet's labels refused; without them, and
	// with the dedicated hosts' taint, accepted.
	taint := corev1.Taint{Key: annotation.LoadBalancerHostTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	_, err = kubelet.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: selector}}, metav1.CreateOptions{})
	refused("the kubelet registers its Node with the DaemonSet's nodeSelector "+labelString(selector), err)
	_, err = kubelet.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: "linux"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{taint}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the kubelet registers its Node: %v", err)
	}
	if _, err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// After registration: neither its own Node nor another.
	_, err = kubelet.Patch(ctx, name, types.MergePatchType, labelsPatch(t, selector), metav1.PatchOptions{})
	refused("the kubelet labels its Node "+labelString(selector), err)
	_, err = kubelet.Patch(ctx, other, types.MergePatchType, labelsPatch(t, selector), metav1.PatchOptions{})
	refused("the kubelet labels Node "+other+" "+labelString(selector), err)

	// The keys of hosts selectors the cloud-config accepts.
	cfg, err := config.Parse("cloud.conf", []byte("[Global]\nregion = r\n[Pool \"edge\"]\naddresses = 192.0.2.0/28\n"+
		"hosts = node-restriction.kubernetes.io/edge=true,example.net.node-restriction.kubernetes.io/rack=a\n"))
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := cfg.Pools[0].Hosts.Requirements()
	for _, r := range reqs {
		l := map[string]string{r.Key(): r.Values().UnsortedList()[0]}
		_, err = kubelet.Patch(ctx, name, types.MergePatchType, labelsPatch(t, l), metav1.PatchOptions{})
		refused("the kubelet labels its Node "+labelString(l)+" (a hosts selector's key)", err)
	}

	// Set by an administrator, the labels stay; so does the taint.
	if _, err := admin.Patch(ctx, name, types.MergePatchType, labelsPatch(t, selector), metav1.PatchOptions{}); err != nil {
		t.Fatalf("an administrator labels %s: %v", name, err)
	}
	unset := map[string]*string{}
	for k := range selector {
		if k != corev1.LabelOSStable {
			unset[k] = nil
		}
	}
	_, err = kubelet.Patch(ctx, name, types.MergePatchType, labelsPatch(t, unset), metav1.PatchOptions{})
	refused("the kubelet removes the labels an administrator set", err)
	_, err = kubelet.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
	refused("the kubelet removes its taint "+taint.ToString(), err)

	// What NodeRestriction leaves to kubelets.
	own := map[string]string{"example.net/edge": "true"}
	if _, err := kubelet.Patch(ctx, name, types.MergePatchType, labelsPatch(t, own), metav1.PatchOptions{}); err != nil {
		t.Errorf("the kubelet labels its Node %s: %v", labelString(own), err)
	}
}

// labelsPatch is a merge patch of metadata.labels (a nil value removes a
// label).
func labelsPatch[V any](t *testing.T, labels map[string]V) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func labelString(l map[string]string) string {
	b, _ := json.Marshal(l)
	return string(b)
}
