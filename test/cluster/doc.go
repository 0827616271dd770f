// Package cluster is sluice's end-to-end test on a real Kubernetes node
// (`make e2e-cluster`, build tag cluster): a single-node cluster on
// loopback — the envtest control plane, kube-controller-manager and
// kube-scheduler, containerd with runc, and a kubelet, all built from the
// project's pinned Go modules or installed from Debian's packages — on which
// the project's images run as pods. It needs root.
package cluster
