// Package kubeconfig gives the agents on hosts (groundcloud-agent,
// groundcloud-router) their apiserver connection.
package kubeconfig

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RESTConfig reads the kubeconfig at path, or the Pod's in-cluster
// configuration when path is empty, and names the client userAgent.
func RESTConfig(path, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}
