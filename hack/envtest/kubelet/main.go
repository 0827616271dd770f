// Command kubelet is the Kubernetes node agent built from the pinned
// k8s.io/kubernetes module, for the single-node cluster of the real-node
// end-to-end test (make e2e-cluster), without downloading release binaries.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
