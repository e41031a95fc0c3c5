// Package lbapi reads and writes groundcloud.io/v1alpha1 LoadBalancer
// objects with the dynamic client, converting to and from the typed API,
// and installs the CRDs. It holds no policy: callers decide what to write.
package lbapi
