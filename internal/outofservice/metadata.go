package outofservice

import (
	"context"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bmc"
	"github.com/groundcloud/groundcloud/internal/config"
)

// The annotations bmc-metadata writes on a Node: what its machine's BMC
// says of the machine.
const (
	AnnotationModel        = "groundcloud.io/bmc-model"
	AnnotationSerialNumber = "groundcloud.io/bmc-serial-number"
	AnnotationBIOSVersion  = "groundcloud.io/bmc-bios-version"
)

// instanceTypeLabels are the labels the model becomes, as the cloud-node
// controller writes an instance type: the label and its beta twin.
var instanceTypeLabels = []string{corev1.LabelInstanceTypeStable, corev1.LabelInstanceType}

// InstanceType turns a BMC's Model into a label value: characters a label
// value may not hold become "-", at most 63 characters, starting and
// ending with a letter or digit; "" when nothing is left.
func InstanceType(model string) string {
	var b strings.Builder
	for _, r := range model {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else if !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-') // a run of other characters becomes one "-"
		}
	}
	s := b.String()
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	s = strings.TrimFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	if len(validation.IsValidLabelValue(s)) > 0 {
		return ""
	}
	return s
}

// metadataPatch returns the changes of n's labels and annotations that
// the BMC's answer a calls for (a nil value removes a key), and whether
// the instance-type label changes. The instance-type labels are written
// only for a machine without instance-type, and only where the Node has
// none or one derived from the model this controller wrote before (its
// AnnotationModel): a label someone else set stays.
func metadataPatch(n *corev1.Node, m *config.Machine, a bmc.Answer) (labels, annotations map[string]any, typed bool) {
	labels, annotations = map[string]any{}, map[string]any{}
	for key, v := range map[string]string{AnnotationModel: a.Model, AnnotationSerialNumber: a.SerialNumber, AnnotationBIOSVersion: a.BIOSVersion} {
		old, had := n.Annotations[key]
		switch {
		case v != "" && old != v:
			annotations[key] = v
		case v == "" && had:
			annotations[key] = nil
		}
	}
	if m.InstanceType != "" {
		return labels, annotations, false
	}
	want, ours := InstanceType(a.Model), InstanceType(n.Annotations[AnnotationModel])
	if want == "" {
		return labels, annotations, false
	}
	for _, key := range instanceTypeLabels {
		if old, had := n.Labels[key]; had && old != want && (ours == "" || old != ours) {
			return labels, annotations, false // someone else's: both labels stay
		}
	}
	for _, key := range instanceTypeLabels {
		if n.Labels[key] != want {
			labels[key] = want
			typed = true
		}
	}
	return labels, annotations, typed
}

// reportMetadata writes what n's machine's BMC says of it on n, when
// bmc-metadata is on and the BMC has answered with the settings in force.
func (c *Controller) reportMetadata(ctx context.Context, cfg *config.Config, n *corev1.Node, m *config.Machine) {
	if !cfg.Global.BMCMetadata || m == nil || m.BMC == nil {
		return
	}
	s, ok := c.power.Status(m.Name)
	if !ok || s.AnsweredAt.IsZero() || s.BMC != *m.BMC {
		return
	}
	labels, annotations, typed := metadataPatch(n, m, s.Answer)
	if len(labels) == 0 && len(annotations) == 0 {
		return
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(n), "machine", m.Name, "bmc", m.BMC.URL)
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err == nil {
		_, err = c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		actions.WithLabelValues("metadata", "error").Inc()
		logger.Error(err, "Cannot write the BMC's metadata on the Node")
		return
	}
	actions.WithLabelValues("metadata", "success").Inc()
	logger.Info("Wrote the BMC's metadata on the Node", "labels", labels, "annotations", annotations)
	if typed {
		c.events.Eventf(n, corev1.EventTypeNormal, "InstanceTypeFromBMC", "Labelled %s=%s from the BMC's Model %q",
			corev1.LabelInstanceTypeStable, InstanceType(s.Answer.Model), s.Answer.Model)
	}
}
