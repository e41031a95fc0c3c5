package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Render runs `kubectl kustomize dir` with the given kubectl binary and
// returns the objects it prints, in its order.
func Render(ctx context.Context, kubectl, dir string) ([]*unstructured.Unstructured, error) {
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w: %s", dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	objs, err := Parse(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w", dir, err)
	}
	return objs, nil
}

// Parse splits a multi-document YAML stream into objects. Empty documents
// (only comments or blanks) are skipped; a document without apiVersion,
// kind or metadata.name is an error. Every problem is reported at once,
// each with its document's number (from 1).
func Parse(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	var errs []error
	for n := 1; ; n++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		obj, err := parseDocument(doc)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("document %d: %w", n, err))
		case obj != nil:
			objs = append(objs, obj)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return objs, nil
}

// parseDocument returns nil for an empty document.
func parseDocument(doc []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	obj := &unstructured.Unstructured{Object: m}
	var missing []string
	for field, value := range map[string]string{"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(), "metadata.name": obj.GetName()} {
		if value == "" {
			missing = append(missing, field)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("no %s", strings.Join(missing, ", no "))
	}
	return obj, nil
}
