package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-dev/sluice/internal/source"
)

// kubeconfig is a minimal valid kubeconfig for a server that does not exist.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestKubeRESTConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Not in a pod: no service account environment.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	t.Setenv("KUBECONFIG", "")
	if c, err := kubeRESTConfig(path); err != nil || c.Host != "https://127.0.0.1:1" {
		t.Fatalf("--kubeconfig: %v, %v", c, err)
	}
	if _, err := kubeRESTConfig(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("missing --kubeconfig: %v", err)
	}
	t.Setenv("KUBECONFIG", path)
	if c, err := kubeRESTConfig(""); err != nil || c.Host != "https://127.0.0.1:1" {
		t.Fatalf("$KUBECONFIG: %v, %v", c, err)
	}
	t.Setenv("KUBECONFIG", "")
	skipIfHomeKubeconfig(t)
	if _, err := kubeRESTConfig(""); !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("nothing configured: %v, want errNoKubeconfig", err)
	}
}

// skipIfHomeKubeconfig skips a test that needs no kubeconfig at all when
// the user running the tests has ~/.kube/config (client-go resolves that
// path once, at start, so the test cannot hide it).
func skipIfHomeKubeconfig(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
		t.Skipf("%s exists; the no-configuration case cannot be tested here", clientcmd.RecommendedHomeFile)
	}
}

// TestRunWithoutAnySource proves the router refuses to start, before
// listening, when neither --tiers-dir nor a Kubernetes configuration exists.
func TestRunWithoutAnySource(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	skipIfHomeKubeconfig(t)
	err := run(context.Background(), context.Background(), []string{"--node-name", "n", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, io.Discard, io.Discard, nil)
	if !errors.Is(err, errNoKubeconfig) {
		t.Fatalf("run = %v, want errNoKubeconfig", err)
	}
}

// fakeReporter is a status reporter that runs until its context ends and
// reports each run's start and end.
type fakeReporter struct {
	started, ended chan struct{}
}

func (f *fakeReporter) Run(ctx context.Context) error {
	f.started <- struct{}{}
	<-ctx.Done()
	f.ended <- struct{}{}
	return nil
}

func (f *fakeReporter) Notify() {}

// fakeTierSource publishes each snapshot sent on snapshots until ctx ends.
type fakeTierSource struct {
	snapshots chan source.Snapshot
}

func (f *fakeTierSource) Run(ctx context.Context, publish func(source.Snapshot)) error {
	for {
		select {
		case s := <-f.snapshots:
			publish(s)
		case <-ctx.Done():
			return nil
		}
	}
}

// TestKubeSourceStopReporting stops the status reports of a running kube
// source: StopReporting returns after the reporter returned, the source
// keeps publishing, and a reporter stopped before Run never starts.
func TestKubeSourceStopReporting(t *testing.T) {
	rep := &fakeReporter{started: make(chan struct{}, 1), ended: make(chan struct{}, 1)}
	src := &fakeTierSource{snapshots: make(chan source.Snapshot)}
	k := &kubeSource{kube: src, reporter: rep}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	published := make(chan source.Snapshot, 1)
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx, func(s source.Snapshot) { published <- s }) }()
	select {
	case <-rep.started:
	case <-time.After(failSafe):
		t.Fatal("the reporter did not start")
	}
	k.StopReporting()
	select {
	case <-rep.ended:
	default:
		t.Fatal("StopReporting returned before the reporter")
	}
	k.StopReporting() // a second call does nothing.
	select {
	case src.snapshots <- source.Snapshot{}:
	case <-time.After(failSafe):
		t.Fatal("the source stopped with the reporter")
	}
	<-published
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}

	stopped := &kubeSource{kube: src, reporter: rep}
	stopped.StopReporting()
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- stopped.Run(ctx2, func(source.Snapshot) {}) }()
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	select {
	case <-rep.started:
		t.Fatal("a reporter stopped before Run started")
	default:
	}
}
