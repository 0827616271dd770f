// Command kube-apiserver is the Kubernetes API server built from the pinned
// k8s.io/kubernetes module, so envtest suites run against a real control plane
// without downloading release binaries.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
