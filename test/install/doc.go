// Package install installs the shipped manifests (config/default) on a real
// API server and runs the built manager, router and engine simulator under
// the shipped ServiceAccounts, then reads the API server's audit log to
// prove that the shipped RBAC grants exactly what the programs use: no
// request of theirs is forbidden, and every granted verb on every resource
// is used. It also follows docs/INSTALL.md's path for a user with a
// cluster: `make install`, `make run-manager` and `make uninstall` against
// the API server, and applies config/inferencepool over the Gateway API
// Inference Extension's CRDs. The tests live in the _test files; run them with
// KUBEBUILDER_ASSETS pointing at kube-apiserver, etcd and kubectl
// (`make envtest-bins`).
package install
