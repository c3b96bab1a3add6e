// Package integration runs the GPU controller against a real kube-apiserver
// and etcd (envtest) with the Xila Guard CRDs and KubeVirt's
// VirtualMachineInstance CRD installed, as a user that holds only its
// generated ClusterRole.
package integration
