package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestServiceAccountKubeconfig: a minted token is the ServiceAccount, with
// only the ServiceAccount's RBAC — forbidden to list nodes until a binding
// allows it.
func TestServiceAccountKubeconfig(t *testing.T) {
	cp := StartT(t, Options{Users: []User{}})
	ctx := t.Context()

	path, err := cp.ServiceAccountKubeconfig(ctx, "kube-system", "node-reader")
	if err != nil {
		t.Fatal(err)
	}
	client := clientFromKubeconfig(t, path)
	if got := tokenLifetime(t, path); got != ServiceAccountTokenLifetime {
		t.Errorf("token lifetime %v, want %v", got, ServiceAccountTokenLifetime)
	}

	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:kube-system:node-reader"; got != want {
		t.Errorf("token is %q, want %q", got, want)
	}

	_, err = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list nodes without RBAC: got %v, want Forbidden", err)
	}

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "node-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "node-reader"}},
	}
	admin := cp.Client()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer sees new bindings through an informer: soon, not
	// at once.
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, lastErr = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return lastErr == nil, nil
	})
	if err != nil {
		t.Fatalf("list nodes after the binding: %v", lastErr)
	}
	if _, err := client.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list services, which no rule allows: got %v, want Forbidden", err)
	}

	// A second call reuses the ServiceAccount and mints a fresh token.
	again, err := cp.ServiceAccountKubeconfig(ctx, "kube-system", "node-reader")
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if again != path {
		t.Errorf("second call wrote %s, want %s", again, path)
	}
	if _, err := clientFromKubeconfig(t, again).CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes with the second token: %v", err)
	}

	if _, err := cp.ServiceAccountKubeconfig(ctx, "no-such-namespace", "x"); err == nil {
		t.Error("service account in a missing namespace: no error")
	}
}

// tokenLifetime reads exp - iat from the JWT in a kubeconfig.
func tokenLifetime(t *testing.T, path string) time.Duration {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(cfg.BearerToken, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Exp, Iat int64 }
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return time.Duration(claims.Exp-claims.Iat) * time.Second
}

func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
