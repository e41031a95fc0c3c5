package controlplane

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceAccountTokenLifetime is how long a token from
// ServiceAccountKubeconfig is valid: long enough for a sandbox left running
// for a day. The apiserver caps nothing (no
// --service-account-max-token-expiration).
const ServiceAccountTokenLifetime = 24 * time.Hour

// ServiceAccountKubeconfig writes <Dir>/serviceaccount-<namespace>-<name>.kubeconfig
// holding a token of the ServiceAccount namespace/name, and returns its path.
// It creates the ServiceAccount if it is missing (the namespace must exist)
// and mints the token with the TokenRequest API, signed by the apiserver's
// --service-account-signing-key-file for its default audience (the
// --service-account-issuer), as kubelet does for a Pod. The token carries
// exactly the ServiceAccount's RBAC: that is what makes it useful to test
// least-privilege rules, unlike the static system:masters users.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	client := cp.Client()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	_, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	seconds := int64(ServiceAccountTokenLifetime / time.Second)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	tok, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	path := cp.path("serviceaccount-" + namespace + "-" + name + ".kubeconfig")
	user := "system:serviceaccount:" + namespace + ":" + name
	if err := writeKubeconfig(path, cp.URL, cp.caPEM, user, tok.Status.Token); err != nil {
		return "", err
	}
	return path, nil
}
