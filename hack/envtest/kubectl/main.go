// Command kubectl is the Kubernetes command-line client built from the
// pinned k8s.io/kubernetes module (the release's own cmd/kubectl), so the
// envtest suites drive a kubectl of the API server's version without
// downloading release binaries or relying on one installed on the machine.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// As kubernetes' cmd/kubectl: the verbosity is set before the command
	// is built, because building it already logs.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck // as upstream.
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
