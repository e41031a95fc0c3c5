package manifests

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // kind namespace/name of each object
		wantErr []string // substrings of the error, all reported at once
	}{
		{
			name: "documents, empty ones skipped",
			in: `# a comment
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: a, namespace: kube-system}
---
# only a comment
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: b}
`,
			want: []string{"ServiceAccount kube-system/a", "ClusterRole b"},
		},
		{name: "nothing", in: "", want: nil},
		{
			name: "every broken document reported",
			in: `kind: ServiceAccount
metadata: {name: a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: fine}
---
apiVersion: v1
metadata: {}
`,
			wantErr: []string{"document 1: no apiVersion", "document 3: no kind, no metadata.name"},
		},
		{name: "not a map", in: "- a\n- b\n", wantErr: []string{"document 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Parse([]byte(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Parse: no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+" "+key(o))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
		})
	}
}
