package kubecore

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/groundcloud/groundcloud/test/framework/controlplane"
)

// TestClient runs every call against a real apiserver and reads the
// results back with client-go's typed client.
func TestClient(t *testing.T) {
	cp := controlplane.StartT(t, controlplane.Options{})
	ctx := t.Context()
	admin := cp.Client()
	c, err := New(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"rack": "a"}}}
	if _, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("get", func(t *testing.T) {
		got, err := c.Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "node-1" || got.Labels["rack"] != "a" || got.UID == "" {
			t.Errorf("got %s labels %v uid %q", got.Name, got.Labels, got.UID)
		}
		// startLabels tells a missing Node from an unreachable apiserver.
		_, err = c.Nodes().Get(ctx, "node-9", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("Get of a missing Node: %v, want NotFound", err)
		}
	})

	t.Run("list and watch", func(t *testing.T) {
		list, err := c.Nodes().List(ctx, metav1.ListOptions{LabelSelector: "rack=a"})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != "node-1" || list.ResourceVersion == "" {
			t.Fatalf("list: %d items, resourceVersion %q", len(list.Items), list.ResourceVersion)
		}
		w, err := c.Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		patch := []byte(`{"metadata":{"labels":{"rack":"b"}}}`)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, "node-1", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			n, ok := ev.Object.(*corev1.Node)
			if ev.Type != watch.Modified || !ok || n.Labels["rack"] != "b" {
				t.Errorf("watch event %s %T, want Modified with rack=b", ev.Type, ev.Object)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no watch event for the label change")
		}
	})

	t.Run("informer", func(t *testing.T) {
		transformed := func(obj any) (any, error) {
			if n, ok := obj.(*corev1.Node); ok {
				n = n.DeepCopy()
				n.Annotations = map[string]string{"seen": "yes"}
				return n, nil
			}
			return obj, nil
		}
		inf := NodeInformer(c.Nodes(), transformed)
		go inf.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		obj, ok, err := inf.GetStore().GetByKey("node-1")
		if err != nil || !ok {
			t.Fatalf("node-1 not cached: %v", err)
		}
		if n := obj.(*corev1.Node); n.Annotations["seen"] != "yes" {
			t.Errorf("cached Node not transformed: %v", n.Annotations)
		}
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !slices.Contains(inf.GetStore().ListKeys(), "node-2") {
			if time.Now().After(deadline) {
				t.Fatalf("node-2 not cached: %v", inf.GetStore().ListKeys())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("events", func(t *testing.T) {
		sink := c.Events()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "node-1.test", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1"},
			Reason:         "Test", Message: "first", Type: corev1.EventTypeNormal, Count: 1,
			Source: corev1.EventSource{Component: "kubecore-test"},
		}
		created, err := sink.Create(ev)
		if err != nil {
			t.Fatal(err)
		}
		created.Message = "second"
		if _, err := sink.Update(created); err != nil {
			t.Fatal(err)
		}
		if _, err := sink.Patch(created, []byte(`{"count":3}`)); err != nil {
			t.Fatal(err)
		}
		got, err := admin.CoreV1().Events("default").Get(ctx, "node-1.test", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Message != "second" || got.Count != 3 {
			t.Errorf("event message %q count %d, want second and 3", got.Message, got.Count)
		}

		// The recorder, as the agent builds it, on a Node (Events of
		// cluster-scoped objects go to the default namespace).
		b := record.NewBroadcaster(record.WithContext(ctx))
		b.StartRecordingToSink(sink)
		defer b.Shutdown()
		rec := b.NewRecorder(Scheme, corev1.EventSource{Component: "kubecore-test"})
		rec.Eventf(&corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "node-1", UID: "node-1"},
			corev1.EventTypeWarning, "Recorded", "by the recorder")
		deadline := time.Now().Add(30 * time.Second)
		for {
			list, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Recorded"})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) == 1 && list.Items[0].Type == corev1.EventTypeWarning && list.Items[0].InvolvedObject.Name == "node-1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("recorded event not written: %d events", len(list.Items))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestAgentLinksCoreOnly guards what this package is for: the agent's
// binary links core/v1 and no other API group (and so no clientset, no
// informer factory, no discovery client).
func TestAgentLinksCoreOnly(t *testing.T) {
	checkLinksCoreOnly(t, "groundcloud-agent")
}

// TestRouterLinksCoreOnly: the same for groundcloud-router, on every node,
// which reads Routes through DynamicInformer and writes its Node's
// condition with the dynamic client (internal/routeapi says why it links no
// k8s.io/cloud-provider).
func TestRouterLinksCoreOnly(t *testing.T) {
	checkLinksCoreOnly(t, "groundcloud-router")
}

func checkLinksCoreOnly(t *testing.T, binary string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-json=ImportPath",
		"github.com/groundcloud/groundcloud/cmd/"+binary).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		switch path := p.ImportPath; {
		case strings.HasPrefix(path, "k8s.io/api/") && path != "k8s.io/api/core/v1",
			path == "k8s.io/cloud-provider",
			path == "k8s.io/client-go/kubernetes/scheme",
			path == "k8s.io/client-go/informers",
			path == "k8s.io/client-go/discovery":
			bad = append(bad, path)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s links %d packages it has no use for, among them %v", binary, len(bad), bad[:min(len(bad), 5)])
	}
}
