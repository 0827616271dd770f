// Command devcluster runs a local Kubernetes control plane (the kube-apiserver
// and etcd that `make envtest-bins` builds) with the ReplicaTier CRD
// installed, writes an admin kubeconfig, and runs until interrupted. It is a
// development aid: point kubectl and the manager at the kubeconfig it prints.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sluice-dev/sluice/internal/cmdline"
)

// help is the program's help besides its flags.
var help = cmdline.Help{
	Name:     "devcluster",
	Synopsis: "[flags]",
	Summary: "devcluster runs a local Kubernetes control plane (kube-apiserver and etcd, as `make envtest-bins`\n" +
		"builds them) with the ReplicaTier CRD installed, writes an admin kubeconfig, and runs until\n" +
		"interrupted. Point kubectl and the manager at the kubeconfig it prints.",
	Examples: []cmdline.Example{
		{Comment: "from the repository root, after make envtest-bins", Command: "devcluster --assets bin/k8s --write-kubeconfig out/devcluster/kubeconfig"},
	},
}

func main() {
	cmd := cmdline.New(help)
	assets := cmd.Flags.String("assets", "bin/k8s", "directory holding kube-apiserver and etcd")
	crds := cmd.Flags.String("crds", "config/crd/bases", "directory of CRDs to install")
	kubeconfig := cmd.Flags.String("write-kubeconfig", "out/devcluster/kubeconfig", "where to write the admin kubeconfig")
	err := cmd.Parse(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil && cmd.Flags.NArg() > 0 {
		err = cmdline.Usagef("unexpected arguments %q", cmd.Flags.Args())
	}
	if err == nil {
		err = run(*assets, *crds, *kubeconfig)
	}
	os.Exit(cmdline.Report(help.Name, err, os.Stderr))
}

func run(assets, crds, kubeconfig string) error {
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}
	if _, err := env.Start(); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() { _ = env.Stop() }()

	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("add admin user: %w", err)
	}
	raw, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o750); err != nil {
		return fmt.Errorf("create kubeconfig directory: %w", err)
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	fmt.Printf("control plane up; in another shell:\n  export KUBECONFIG=%s\n", kubeconfig)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	fmt.Println("stopping control plane")
	return nil
}
