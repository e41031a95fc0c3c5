package outofservice

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

type statuses map[string]bmc.Status

func (s statuses) Status(m string) (bmc.Status, bool) { v, ok := s[m]; return v, ok }

func node(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
}

// TestController: a NotReady Node whose BMC says Off is tainted and marked
// with an Event; a person's taint on another is kept; once the BMC says On
// and the Node is Ready our taint goes.
func TestController(t *testing.T) {
	RegisterMetrics()
	b := config.BMC{URL: "https://bmc", InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	cfg := &config.Config{Global: config.Global{BMCOutOfService: config.OutOfServiceTaint, BMCOutOfServiceGrace: 30 * time.Second},
		Machines: map[string]*config.Machine{"a": {Name: "a", BMC: &b}, "h": {Name: "h", BMC: &b}}}
	human := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "by-hand", Effect: corev1.TaintEffectNoExecute}
	off := bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: bmc.PowerOff}, AnsweredAt: now, OffSince: now.Add(-time.Minute), MaxAge: 30 * time.Second}
	on := bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: bmc.PowerOn}, AnsweredAt: now, MaxAge: 30 * time.Second}
	power := statuses{"a": off, "h": on}
	c, client, events, ctx := newTestController(t, cfg, power, node("a", corev1.ConditionUnknown), node("h", corev1.ConditionTrue, human))

	c.SyncAll(ctx)
	a := get(t, client, "a")
	if !slices.ContainsFunc(a.Spec.Taints, func(t corev1.Taint) bool { return t == Taint }) || a.Annotations[MarkAnnotation] == "" {
		t.Fatalf("a not tainted and marked: %v %v", a.Spec.Taints, a.Annotations)
	}
	if e := <-events.Events; !strings.Contains(e, "OutOfServiceTaintApplied") || !strings.Contains(e, "PowerState Off") {
		t.Errorf("event %q", e)
	}
	if h := get(t, client, "h"); !slices.Equal(h.Spec.Taints, []corev1.Taint{human}) {
		t.Errorf("a person's taint changed: %v", h.Spec.Taints)
	}

	// The machine is back: the BMC says On and the Node is Ready.
	power["a"], power["h"] = on, on
	a.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := client.CoreV1().Nodes().Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCache(t, c, "a", func(n *corev1.Node) bool { return n.Status.Conditions[0].Status == corev1.ConditionTrue })
	c.SyncAll(ctx)
	if a := get(t, client, "a"); len(a.Spec.Taints) != 0 || a.Annotations[MarkAnnotation] != "" {
		t.Errorf("a still tainted or marked: %v %v", a.Spec.Taints, a.Annotations)
	}
	if e := <-events.Events; !strings.Contains(e, "OutOfServiceTaintRemoved") {
		t.Errorf("event %q", e)
	}
	if h := get(t, client, "h"); !slices.Equal(h.Spec.Taints, []corev1.Taint{human}) {
		t.Errorf("a person's taint removed: %v", h.Spec.Taints)
	}
}

func get(t *testing.T, client *fake.Clientset, name string) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitCache(t *testing.T, c *Controller, name string, ok func(*corev1.Node) bool) {
	t.Helper()
	for range 500 {
		if n, err := c.nodes.Get(name); err == nil && ok(n) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the cache never showed the change of %s", name)
}

// TestControllerFindsMachinesByProviderID: a Node named otherwise than its
// machine is found as the provider finds it, by its provider ID, and its
// machine's BMC decides.
func TestControllerFindsMachinesByProviderID(t *testing.T) {
	RegisterMetrics()
	b := config.BMC{URL: "https://bmc-7", InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	cfg := &config.Config{Global: config.Global{BMCOutOfService: config.OutOfServiceTaint, BMCOutOfServiceGrace: 30 * time.Second},
		Machines: map[string]*config.Machine{"m7": {Name: "m7", Region: "lab", BMC: &b}}}
	n := node("worker-7", corev1.ConditionUnknown)
	n.Spec.ProviderID = inventory.ProviderID("lab", "m7")
	off := bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: bmc.PowerOff}, AnsweredAt: now, OffSince: now.Add(-time.Minute), MaxAge: 30 * time.Second}
	c, client, events, ctx := newTestController(t, cfg, statuses{"m7": off}, n)

	c.SyncAll(ctx)
	if w := get(t, client, "worker-7"); !slices.ContainsFunc(w.Spec.Taints, func(t corev1.Taint) bool { return t == Taint }) {
		t.Fatalf("worker-7 (machine m7 by provider ID, BMC Off) not tainted: %v", w.Spec.Taints)
	}
	select {
	case e := <-events.Events:
		if !strings.Contains(e, "OutOfServiceTaintApplied") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event for the taint")
	}
}

// TestBMCCondition: a Node whose machine's BMC refuses the credentials
// gets BMCReachable False (Unauthorized) and a Warning Event, and nothing
// else (no taint: out-of-service is off); answering again, True and a
// Normal Event; an unchanged answer writes nothing.
func TestBMCCondition(t *testing.T) {
	RegisterMetrics()
	b := config.BMC{URL: "https://bmc-b", InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	cfg := &config.Config{Machines: map[string]*config.Machine{"b": {Name: "b", BMC: &b}}}
	refused := bmc.Status{BMC: b, Err: errors.New("401 Unauthorized"), Reason: bmc.ReasonUnauthorized, PolledAt: now, MaxAge: 30 * time.Second}
	power := statuses{"b": refused}
	c, client, events, ctx := newTestController(t, cfg, power, node("b", corev1.ConditionUnknown))
	condOf := func() *corev1.NodeCondition {
		for _, cd := range get(t, client, "b").Status.Conditions {
			if cd.Type == ConditionBMC {
				return &cd
			}
		}
		return nil
	}
	nextEvent := func() string {
		select {
		case e := <-events.Events:
			return e
		default:
			return ""
		}
	}

	c.SyncAll(ctx)
	if cd := condOf(); cd == nil || cd.Status != corev1.ConditionFalse || cd.Reason != "Unauthorized" || !strings.Contains(cd.Message, "401 Unauthorized") {
		t.Fatalf("condition %+v", cd)
	}
	if e := nextEvent(); !strings.HasPrefix(e, "Warning BMCUnreachable") {
		t.Errorf("event %q", e)
	}
	if n := get(t, client, "b"); len(n.Spec.Taints) != 0 || len(n.Status.Conditions) != 2 {
		t.Errorf("taints %v, conditions %v: want none, Ready and BMCReachable", n.Spec.Taints, n.Status.Conditions)
	}
	waitCache(t, c, "b", func(n *corev1.Node) bool { return len(n.Status.Conditions) == 2 })
	c.SyncAll(ctx)
	if e := nextEvent(); e != "" {
		t.Errorf("the same failure again raised %q", e)
	}

	power["b"] = bmc.Status{BMC: b, Answer: bmc.Answer{PowerState: bmc.PowerOn}, AnsweredAt: now, PolledAt: now, MaxAge: 30 * time.Second}
	c.SyncAll(ctx)
	if cd := condOf(); cd == nil || cd.Status != corev1.ConditionTrue || cd.Reason != ReasonAnswered || !strings.Contains(cd.Message, "PowerState On") {
		t.Fatalf("condition after the answer %+v", cd)
	}
	if e := nextEvent(); !strings.HasPrefix(e, "Normal BMCReachable") {
		t.Errorf("event %q", e)
	}
}

// newTestController returns a controller over a fake apiserver holding
// nodes, its Node cache synced, recording Events in events, at time now.
func newTestController(t *testing.T, cfg *config.Config, power PowerStatus, nodes ...*corev1.Node) (*Controller, *fake.Clientset, *record.FakeRecorder, context.Context) {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	client := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(client, 0)
	informer := f.Core().V1().Nodes()
	informer.Informer()
	ctx := t.Context()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	events := record.NewFakeRecorder(10)
	c := New(client, informer.Lister(), informer.Informer().HasSynced, func() *config.Config { return cfg }, power, &fencer{})
	c.events, c.now = events, func() time.Time { return now }
	return c, client, events, ctx
}

// fencer records the machines it powers off; it fails while err is set.
type fencer struct {
	mu   sync.Mutex
	urls []string
	err  error
}

func (f *fencer) PowerOff(_ context.Context, b *config.BMC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urls = append(f.urls, b.URL)
	return f.err
}

func (f *fencer) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.urls)
}

// TestControllerFences: a machine with bmc-fence = power-off whose Node
// has been NotReady for bmc-fence-after while its BMC says On is powered
// off once, with a Warning Event that says why and one that says the BMC
// accepted it; not again within bmc-fence-after; a Ready Node's machine
// and one without fencing are never powered off; a refused power-off is a
// FenceFailed Event.
func TestControllerFences(t *testing.T) {
	RegisterMetrics()
	bmcOf := func(url string) *config.BMC {
		return &config.BMC{URL: url, InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	}
	cfg := &config.Config{
		Global: config.Global{BMCOutOfService: config.OutOfServiceTaint, BMCOutOfServiceGrace: 30 * time.Second,
			BMCFence: config.FencePowerOff, BMCFenceAfter: 2 * time.Minute},
		Machines: map[string]*config.Machine{
			"hung": {Name: "hung", BMC: bmcOf("https://hung")}, "fine": {Name: "fine", BMC: bmcOf("https://fine")},
			"spared": {Name: "spared", BMC: bmcOf("https://spared"), Fence: config.FenceOff},
		},
	}
	power := statuses{}
	for name, m := range cfg.Machines {
		power[name] = bmc.Status{BMC: *m.BMC, Answer: bmc.Answer{PowerState: bmc.PowerOn}, AnsweredAt: now, MaxAge: 30 * time.Second}
	}
	notReady := func(name string) *corev1.Node {
		n := node(name, corev1.ConditionUnknown)
		n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-3 * time.Minute))
		return n
	}
	c, client, events, ctx := newTestController(t, cfg, power, notReady("hung"), node("fine", corev1.ConditionTrue), notReady("spared"))
	f := c.fencer.(*fencer)

	c.SyncAll(ctx)
	c.fences.Wait()
	if got := f.calls(); !slices.Equal(got, []string{"https://hung"}) {
		t.Fatalf("powered off %v, want the hung machine's BMC only", got)
	}
	for _, want := range []string{"Warning Fencing Powering off machine hung through its BMC (ForceOff): the Node's Ready condition has been Unknown since", "Normal Fenced"} {
		if e := <-events.Events; !strings.HasPrefix(e, want) {
			t.Errorf("event %q, want %q...", e, want)
		}
	}
	c.SyncAll(ctx)
	c.fences.Wait()
	if got := f.calls(); len(got) != 1 {
		t.Errorf("powered off again within bmc-fence-after: %v", got)
	}
	for _, name := range []string{"hung", "fine", "spared"} {
		if n := get(t, client, name); len(n.Spec.Taints) != 0 {
			t.Errorf("%s tainted while its BMC says On: %v", name, n.Spec.Taints)
		}
	}

	// Still On after bmc-fence-after, and the BMC refuses.
	c.now = func() time.Time { return now.Add(2 * time.Minute) }
	for name, s := range power {
		s.AnsweredAt = now.Add(2 * time.Minute)
		power[name] = s
	}
	f.err = errors.New("409 Conflict")
	c.SyncAll(ctx)
	c.fences.Wait()
	if got := f.calls(); len(got) != 2 {
		t.Errorf("not powered off again after bmc-fence-after: %v", got)
	}
	<-events.Events // Fencing
	if e := <-events.Events; !strings.HasPrefix(e, "Warning FenceFailed Machine hung was not powered off: 409 Conflict") {
		t.Errorf("event %q", e)
	}
}
