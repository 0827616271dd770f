// Command kube-controller-manager runs the Kubernetes controllers
// (Deployments, DaemonSets, ReplicaSets, ServiceAccounts, garbage collection)
// built from the pinned k8s.io/kubernetes module, for the single-node cluster
// of the real-node end-to-end test (make e2e-cluster).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
