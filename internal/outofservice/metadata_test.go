package outofservice

import (
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
)

func TestInstanceType(t *testing.T) {
	for model, want := range map[string]string{
		"PowerEdge R640":                "PowerEdge-R640",
		"ProLiant DL360 Gen10 Plus":     "ProLiant-DL360-Gen10-Plus",
		"  (Supermicro) X11SPi-TF/4U ":  "Supermicro-X11SPi-TF-4U",
		"":                              "",
		"---":                           "",
		"ThinkSystem SR650 V2 [7Z73]":   "ThinkSystem-SR650-V2-7Z73",
		strings.Repeat("x", 70) + "-yz": strings.Repeat("x", 63),
		"Ünïcode":                       "n-code",
	} {
		if got := InstanceType(model); got != want {
			t.Errorf("InstanceType(%q) = %q, want %q", model, got, want)
		}
	}
}

// TestMetadata: with bmc-metadata, a Node gets the BMC's model, serial
// number and BIOS version as annotations and, for a machine without
// instance-type, the instance-type labels from the model, with an Event;
// a label a person set, and a machine with instance-type in the
// cloud-config, keep theirs; a new model replaces the label written from
// the old one; a field the BMC no longer gives loses its annotation;
// without bmc-metadata nothing is written.
func TestMetadata(t *testing.T) {
	RegisterMetrics()
	b := config.BMC{URL: "https://bmc", InsecureSkipVerify: true, Timeout: time.Second, PollInterval: 10 * time.Second}
	cfg := &config.Config{Global: config.Global{BMCMetadata: true}, Machines: map[string]*config.Machine{
		"a": {Name: "a", BMC: &b}, "person": {Name: "person", BMC: &b}, "typed": {Name: "typed", BMC: &b, InstanceType: "large"},
	}}
	answer := bmc.Answer{PowerState: bmc.PowerOn, Model: "PowerEdge R640", SerialNumber: "CN7016", BIOSVersion: "2.19.1"}
	st := bmc.Status{BMC: b, Answer: answer, AnsweredAt: now, MaxAge: 30 * time.Second}
	power := statuses{"a": st, "person": st, "typed": st}
	byHand := node("person", corev1.ConditionTrue)
	byHand.Labels = map[string]string{corev1.LabelInstanceTypeStable: "m-large"}
	typed := node("typed", corev1.ConditionTrue)
	typed.Labels = map[string]string{corev1.LabelInstanceTypeStable: "large"}
	c, client, events, ctx := newTestController(t, cfg, power, node("a", corev1.ConditionTrue), byHand, typed)

	c.SyncAll(ctx)
	wantAnn := map[string]string{AnnotationModel: "PowerEdge R640", AnnotationSerialNumber: "CN7016", AnnotationBIOSVersion: "2.19.1"}
	for _, name := range []string{"a", "person", "typed"} {
		if got := get(t, client, name).Annotations; !maps.Equal(got, wantAnn) {
			t.Errorf("%s: annotations %v, want %v", name, got, wantAnn)
		}
	}
	if got := get(t, client, "a").Labels; got[corev1.LabelInstanceTypeStable] != "PowerEdge-R640" || got[corev1.LabelInstanceType] != "PowerEdge-R640" {
		t.Errorf("a: labels %v", got)
	}
	if got := get(t, client, "person").Labels; !maps.Equal(got, map[string]string{corev1.LabelInstanceTypeStable: "m-large"}) {
		t.Errorf("person: a person's label changed: %v", got)
	}
	if got := get(t, client, "typed").Labels; !maps.Equal(got, map[string]string{corev1.LabelInstanceTypeStable: "large"}) {
		t.Errorf("typed: the cloud-config's instance type changed: %v", got)
	}
	select {
	case e := <-events.Events:
		if !strings.Contains(e, "InstanceTypeFromBMC") || !strings.Contains(e, "PowerEdge-R640") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event for the instance type")
	}
	select {
	case e := <-events.Events:
		t.Errorf("one Event only, got also %q", e)
	default:
	}

	// A new board: the label follows; no BIOS version: its annotation goes.
	st.Answer.Model, st.Answer.BIOSVersion = "PowerEdge R650", ""
	power["a"] = st
	waitCache(t, c, "a", func(n *corev1.Node) bool { return n.Annotations[AnnotationModel] != "" })
	c.SyncAll(ctx)
	a := get(t, client, "a")
	if a.Labels[corev1.LabelInstanceTypeStable] != "PowerEdge-R650" || a.Annotations[AnnotationModel] != "PowerEdge R650" {
		t.Errorf("a after a new model: labels %v, annotations %v", a.Labels, a.Annotations)
	}
	if _, ok := a.Annotations[AnnotationBIOSVersion]; ok {
		t.Errorf("a: BIOS version annotation kept: %v", a.Annotations)
	}

	// Off: nothing is written, what was stays.
	cfg.Global.BMCMetadata = false
	st.Answer.Model = "Other"
	power["a"] = st
	waitCache(t, c, "a", func(n *corev1.Node) bool { return n.Annotations[AnnotationModel] == "PowerEdge R650" })
	client.ClearActions()
	c.SyncAll(ctx)
	for _, act := range client.Actions() {
		if act.GetVerb() == "patch" {
			t.Errorf("bmc-metadata = false wrote: %v", act)
		}
	}
}
