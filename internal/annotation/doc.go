// Package annotation holds, in one place, the names of the annotations
// and labels users put on Kubernetes objects to steer groundcloud, with
// what each means.
//
// It owns:
//   - the annotations read on Services of type LoadBalancer (service.go),
//     and ServiceAnnotations, the list of them that docs/annotations.md
//     must document exactly (a test checks both ways). A new one goes into
//     service.go with a doc comment saying what it means, into
//     ServiceAnnotations, and gets a section in docs/annotations.md;
//   - the label that makes a Node a load-balancer host, and the taint of
//     a dedicated one (node.go).
//
// It holds names only: reading, validating and acting on the values stays
// with the package that uses them (internal/ipam reads the address
// request, internal/loadbalancers the forwarding). It must not import
// another groundcloud package, do I/O or hold state.
//
// Not here, on purpose:
//   - the annotations the controller manager writes on LoadBalancer objects
//     for kubectl's columns, v1alpha1.AnnotationPorts and
//     v1alpha1.AnnotationAddresses: the CRD's printer columns name them, so
//     they are part of the API and stay in api/v1alpha1;
//   - lbclass.Class, a value of spec.loadBalancerClass, and
//     lbclass.Finalizer, the finalizer of the controller that serves that
//     class: neither is an annotation or a label, and both belong to that
//     controller;
//   - backends.ConditionPodRoutes, a Node condition type;
//   - the group name groundcloud.io of the API (api/v1alpha1);
//   - the upstream keys groundcloud also reads
//     (service.beta.kubernetes.io/load-balancer-source-ranges,
//     node.kubernetes.io/exclude-from-external-load-balancers): their
//     constants come from k8s.io/api.
package annotation
