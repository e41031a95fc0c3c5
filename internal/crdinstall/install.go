package crdinstall

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/groundcloud/groundcloud/deploy/crds"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// All server-side-applies every CRD of deploy/crds (LoadBalancer, Route,
// AddressPool, ...) with fieldManager and waits until each is Established.
func All(ctx context.Context, dyn dynamic.Interface, fieldManager string) error {
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		return err
	}
	for _, file := range files {
		data, err := crds.FS.ReadFile(file)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("parse %s: %w", file, err)
		}
		name := u.GetName()
		if _, err := dyn.Resource(crdResource).Apply(ctx, name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", name, err)
		}
		if err := waitEstablished(ctx, dyn, name); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("CRD installed", "crd", name)
	}
	return nil
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}
