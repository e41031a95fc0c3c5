package manifests

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ValuesTable renders a chart's values.yaml as a Markdown table of every
// documented value: key, type, default and description. A value is
// documented by a comment that starts with "# --" right above its key
// (helm-docs' convention); a map without one is described key by key. A
// value that is neither documented nor a map is an error, so that a new
// value cannot go undocumented.
func ValuesTable(valuesYAML []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return "", fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", errors.New("values.yaml: not a map")
	}
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	if err := valueRows(&b, "", doc.Content[0]); err != nil {
		return "", err
	}
	return b.String(), nil
}

func valueRows(b *strings.Builder, prefix string, m *yaml.Node) error {
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		desc, documented := description(k.HeadComment)
		switch {
		case documented:
			def, err := defaultOf(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("values.yaml line %d: %s: %w", k.Line, key, err))
				continue
			}
			pipe := strings.NewReplacer("|", `\|`)
			fmt.Fprintf(b, "| %s | %s | `%s` | %s |\n", key, typeOf(v), pipe.Replace(def), pipe.Replace(desc))
		case v.Kind == yaml.MappingNode:
			errs = append(errs, valueRows(b, key+".", v))
		default:
			errs = append(errs, fmt.Errorf("values.yaml line %d: %s has no \"# --\" description", k.Line, key))
		}
	}
	return errors.Join(errs...)
}

// description joins the lines of a "# --" comment (the last one above the
// key, when several comment blocks are there).
func description(comment string) (string, bool) {
	i := strings.LastIndex(comment, "# --")
	if i < 0 {
		return "", false
	}
	var words []string
	for _, line := range strings.Split(comment[i+len("# --"):], "\n") {
		words = append(words, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#")))
	}
	return strings.TrimSpace(strings.Join(words, " ")), true
}

func typeOf(v *yaml.Node) string {
	switch {
	case v.Kind == yaml.SequenceNode:
		return "list"
	case v.Kind == yaml.MappingNode:
		return "object"
	case v.Tag == "!!int":
		return "int"
	case v.Tag == "!!bool":
		return "bool"
	}
	return "string"
}

// defaultOf is the value as compact JSON.
func defaultOf(v *yaml.Node) (string, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return "", err
	}
	out, err := json.Marshal(x)
	return string(out), err
}
