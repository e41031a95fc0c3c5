package controlplane

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// newTokens gives each user a random bearer token.
func newTokens(users []User) (map[string]string, error) {
	tokens := make(map[string]string, len(users))
	for _, u := range users {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("token for %s: %w", u.Name, err)
		}
		tokens[u.Name] = hex.EncodeToString(b)
	}
	return tokens, nil
}

// tokenFile renders --token-auth-file: token,user,uid,"group1,group2".
func tokenFile(users []User, tokens map[string]string) []byte {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s,%s,%s,%q\n", tokens[u.Name], u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	return []byte(b.String())
}

// writeServiceAccountKey writes a fresh RSA private key as PEM; the
// apiserver reads it both as --service-account-key-file (verifying) and as
// --service-account-signing-key-file.
func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	return nil
}

// restConfig is a client config for a token user of the apiserver at url
// whose serving certificate chains to caPEM.
func restConfig(url string, caPEM []byte, token string) *rest.Config {
	return &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), caPEM...)},
		// The test bed creates objects in bursts; client-side throttling
		// would only measure itself.
		QPS:   1000,
		Burst: 2000,
	}
}

// writeKubeconfig writes a kubeconfig for user with token at path.
func writeKubeconfig(path, url string, caPEM []byte, user, token string) error {
	const cluster = "groundcloud-testbed"
	cfg := clientcmdv1.Config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []clientcmdv1.NamedCluster{{Name: cluster, Cluster: clientcmdv1.Cluster{Server: url, CertificateAuthorityData: caPEM}}},
		AuthInfos:      []clientcmdv1.NamedAuthInfo{{Name: user, AuthInfo: clientcmdv1.AuthInfo{Token: token}}},
		Contexts:       []clientcmdv1.NamedContext{{Name: user, Context: clientcmdv1.Context{Cluster: cluster, AuthInfo: user, Namespace: "default"}}},
		CurrentContext: user,
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig for %s: %w", user, err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig for %s: %w", user, err)
	}
	return nil
}
