//go:build cluster

package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/supervise"
	"github.com/sluice-dev/sluice/test/netnstest"
)

// Names of the cluster.
const (
	// nodeName is the one node's name.
	nodeName = "sluice-e2e-node"
	// pauseImage is the sandbox image the test builds and imports: no
	// registry is reachable.
	pauseImage = "localhost/sluice-e2e/pause:1"
	// k8sNamespace is containerd's namespace of the kubelet's images and
	// containers.
	k8sNamespace = "k8s.io"
)

// Waiting bounds.
const (
	// nodeReadyTimeout bounds the wait for the node to register Ready.
	nodeReadyTimeout = 2 * time.Minute
	// podTimeout bounds the wait for a pod to run.
	podTimeout = 2 * time.Minute
	// logTail is how much of each process's output a failure prints.
	logTail = 16 << 10
	// commandTimeout bounds one command (ctr, podman, go build).
	commandTimeout = 5 * time.Minute
)

// The node's network: the whole cluster runs in a network namespace of its
// own (TestMain), which has a loopback interface and the pod network's
// bridge, and nothing else.
const (
	// serviceRange is the Services' cluster IP range; the API server
	// gives its first address to the `kubernetes` Service.
	serviceRange = "10.0.0.0/24"
	// apiServerIP is the `kubernetes` Service's cluster IP. It is
	// assigned to the namespace's loopback interface and the API server
	// serves on it, so the in-cluster address every pod is given reaches
	// the API server without a service proxy, from the host network and
	// from the pod network alike.
	apiServerIP = "10.0.0.1"
	// apiServerPort is the `kubernetes` Service's port, which the API
	// server serves on for the same reason.
	apiServerPort = "443"
	// cniPlugins is where Debian's containernetworking-plugins installs
	// the plugins.
	cniPlugins = "/usr/lib/cni"
)

// TestMain runs the tests in a network namespace of their own
// (netnstest). Everything the cluster serves, the router's front door on
// the node's :8080 included, is then reachable from this machine's tests
// alone and from no other machine, and no port of the machine is taken.
func TestMain(m *testing.M) {
	if code, exit := netnstest.Enter("cluster test"); exit {
		os.Exit(code)
	}
	if err := setUpNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster test: setting up the network namespace:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// setUpNamespace gives the new namespace's loopback interface the API
// server's address.
func setUpNamespace() error {
	_, err := run("", nil, "ip", "address", "add", apiServerIP+"/32", "dev", "lo")
	return err
}

// repoRoot is the repository, seen from this package's directory.
var repoRoot = filepath.Join("..", "..")

// node is the single-node cluster: the envtest control plane, the
// controller manager and the scheduler, containerd and the kubelet.
type node struct {
	dir        string
	kubeconfig string
	k8s        client.Client
	socket     string // containerd's socket.
}

// bin returns the path of a binary the Makefile built into bin/k8s.
func bin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "bin", "k8s")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil { //nolint:gosec // the test's own bin directory.
		t.Fatalf("%s missing: run `make e2e-cluster`, which builds it (%v)", name, err)
	}
	return p
}

// tool returns the path of a program the machine must have.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: `make e2e-cluster` installs containerd, runc and podman from Debian's packages (%v)", name, err)
	}
	return p
}

// startNode starts the cluster in a fresh directory and stops everything,
// in order, when the test ends, also when it fails.
func startNode(t *testing.T) *node {
	t.Helper()
	for _, name := range []string{"containerd", "runc", "ctr", "podman", "ip"} {
		tool(t, name)
	}
	n := &node{dir: t.TempDir()}
	// The kubelet mounts its root directory and the pods' volumes under
	// it; what is left once everything stopped is unmounted, so that the
	// directory can be removed (this cleanup runs last).
	t.Cleanup(func() { unmountUnder(t, n.dir) })
	cgroupRoot := makeCgroupRoot(t)
	assets := filepath.Dir(bin(t, "kube-apiserver"))

	// The control plane: etcd and kube-apiserver, with an admin user. The
	// API server serves on the address of the `kubernetes` Service, which
	// is every pod's in-cluster address of it (there is no service proxy),
	// with the ServiceAccount admission plugin that gives pods their tokens.
	apiServer := &envtest.APIServer{}
	apiServer.Address, apiServer.Port = apiServerIP, apiServerPort
	apiServer.Configure().
		Set("service-cluster-ip-range", serviceRange).
		Disable("disable-admission-plugins")
	env := &envtest.Environment{BinaryAssetsDirectory: assets,
		ControlPlane:      envtest.ControlPlane{APIServer: apiServer},
		CRDDirectoryPaths: []string{filepath.Join(repoRoot, "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	if _, err := env.Start(); err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	n.kubeconfig = filepath.Join(n.dir, "admin.kubeconfig")
	write(t, n.kubeconfig, string(kc))
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sluicev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if n.k8s, err = client.New(admin.Config(), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}

	// The controllers and the scheduler, as the admin (the cluster has
	// no other identities to give them).
	api := env.ControlPlane.GetAPIServer()
	ca := filepath.Join(n.dir, "ca.crt")
	write(t, ca, string(api.CA))
	n.start(t, "kube-controller-manager", bin(t, "kube-controller-manager"), []string{
		"--kubeconfig", n.kubeconfig,
		"--service-account-private-key-file", filepath.Join(api.CertDir, "sa-signer.key"),
		"--root-ca-file", ca,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "0",
	})
	n.start(t, "kube-scheduler", bin(t, "kube-scheduler"), []string{
		"--kubeconfig", n.kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0", "-v", "2",
	})

	// containerd, then the sandbox image.
	n.socket = n.startContainerd(t)
	n.importImage(t, n.buildPause(t))

	// The kubelet.
	kubeletDir := filepath.Join(n.dir, "kubelet")
	manifests := filepath.Join(n.dir, "manifests")
	podLogs := filepath.Join(n.dir, "pod-logs")
	for _, d := range []string{kubeletDir, manifests, podLogs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeFixedPaths(t, podLogs)
	config := filepath.Join(n.dir, "kubelet.yaml")
	write(t, config, fmt.Sprintf(kubeletConfig, "unix://"+n.socket, manifests, cgroupRoot, podLogs))
	n.start(t, "kubelet", bin(t, "kubelet"), []string{
		"--config", config,
		"--kubeconfig", n.kubeconfig,
		"--root-dir", kubeletDir,
		"--cert-dir", filepath.Join(n.dir, "kubelet-pki"),
		"--hostname-override", nodeName,
		"--node-ip", "127.0.0.1",
	})
	t.Cleanup(func() { n.deletePods(t) }) // runs before the kubelet stops.
	n.awaitNodeReady(t)
	return n
}

// cgroupHierarchies is where the machine mounts its cgroup hierarchies.
const cgroupHierarchies = "/sys/fs/cgroup"

// makeCgroupRoot creates a cgroup of the test's own in every hierarchy, for
// the kubelet to put the pods' cgroups under, and returns its path. When
// the test ends, after everything stopped (this cleanup runs before the
// directory's unmount only), it removes it with what the kubelet created in
// it, so no test leaves a cgroup behind and no two runs share one.
func makeCgroupRoot(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("sluice-e2e-%d", os.Getpid())
	hierarchies, err := os.ReadDir(cgroupHierarchies)
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, h := range hierarchies {
		dir := filepath.Join(cgroupHierarchies, h.Name(), name)
		if err := os.Mkdir(dir, 0o755); err == nil { //nolint:gosec // a cgroup, as the kubelet makes them.
			made = append(made, dir)
		} else if !os.IsExist(err) && !errors.Is(err, syscall.ENOTDIR) {
			t.Fatalf("creating cgroup %s: %v", dir, err)
		}
	}
	t.Cleanup(func() {
		for _, dir := range made {
			removeCgroup(t, dir)
		}
	})
	return "/" + name
}

// removeCgroup removes the cgroup dir and every cgroup below it, deepest
// first (a cgroup's files go with it).
func removeCgroup(t *testing.T, dir string) {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Errorf("listing cgroup %s: %v", dir, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			t.Errorf("removing cgroup %s: %v", dirs[i], err)
		}
	}
}

// The kubelet's paths that its flags and configuration do not move.
const (
	// kubeletFixedDir holds the device plugins' directory.
	kubeletFixedDir = "/var/lib/kubelet"
	// containerLogLinks holds a link to each container's log.
	containerLogLinks = "/var/log/containers"
)

// removeFixedPaths removes, when the test ends (this cleanup runs after
// the kubelet stopped), what the kubelet made outside the test's
// directory: the links to the logs under podLogs, and the fixed
// directories it created. The machine must not run a kubelet of its own.
func removeFixedPaths(t *testing.T, podLogs string) {
	t.Helper()
	var created []string
	for _, dir := range []string{kubeletFixedDir, containerLogLinks} {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			created = append(created, dir)
		}
	}
	t.Cleanup(func() {
		links, err := os.ReadDir(containerLogLinks)
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("listing %s: %v", containerLogLinks, err)
		}
		for _, l := range links {
			link := filepath.Join(containerLogLinks, l.Name())
			if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, podLogs+string(filepath.Separator)) {
				if err := os.Remove(link); err != nil {
					t.Errorf("removing %s: %v", link, err)
				}
			}
		}
		for _, dir := range created {
			remove := os.RemoveAll
			if dir == containerLogLinks {
				remove = os.Remove // what is not the test's stays.
			}
			if err := remove(dir); err != nil {
				t.Errorf("removing %s: %v", dir, err)
			}
		}
	})
}

// start starts a process of the cluster, logging to a file in the test's
// directory, and stops it when the test ends, after what was started later
// (cleanups run last first): the kubelet stops before containerd, and both
// before the control plane.
func (n *node) start(t *testing.T, name, path string, args []string) {
	t.Helper()
	p, err := supervise.Start(context.Background(), supervise.Spec{
		Name: name, Path: path, Args: args, Log: filepath.Join(n.dir, name+".log"), Tail: logTail,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %s (last %d bytes):\n%s", name, logTail, p.Tail())
		}
	})
}

// kubeletConfig is the kubelet's configuration for this machine kind: the
// cgroupfs driver on a cgroup v1/hybrid hierarchy, under a cgroup of the
// test's own, no swap check, every server on loopback, no eviction and no
// node allocatable enforcement (the node is a shared development machine).
// %s: containerd's endpoint, the static pod directory, the cgroup root,
// the pods' log directory.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: %s
staticPodPath: %s
cgroupRoot: %s
podLogsDir: %s
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`

// containerdConfig is containerd's configuration: its state under the
// test's directory, runc through its absolute path with cgroupfs,
// restrict_oom_score_adj (without it every sandbox fails to start on this
// machine kind), the test's pause image and the pod network. %s: root,
// state, socket, sandbox image, CNI plugins, CNI configuration.
const containerdConfig = `version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
`

// podNetwork is the pod network: a bridge on the node with host-local
// addresses, the bridge the pods' default gateway. No masquerading: the
// node's network namespace has no way out. %s: the address leases'
// directory.
const podNetwork = `{
  "cniVersion": "0.4.0",
  "name": "sluice-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": "sluice-e2e0",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "routes": [{"dst": "0.0.0.0/0"}],
      "ranges": [[{"subnet": "10.88.0.0/24", "gateway": "10.88.0.1"}]]
    }
  }]
}
`

// startContainerd starts containerd and returns its socket.
func (n *node) startContainerd(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(n.dir, "containerd.sock")
	config := filepath.Join(n.dir, "containerd.toml")
	cni := filepath.Join(n.dir, "cni")
	if err := os.MkdirAll(cni, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(cni, "10-sluice-e2e.conflist"), fmt.Sprintf(podNetwork, filepath.Join(n.dir, "cni-ipam")))
	write(t, config, fmt.Sprintf(containerdConfig, filepath.Join(n.dir, "containerd-root"), filepath.Join(n.dir, "containerd-state"),
		socket, pauseImage, cniPlugins, cni))
	n.start(t, "containerd", tool(t, "containerd"), []string{"--config", config})
	if err := supervise.Poll(context.Background(), time.Minute, "containerd's socket", func() (bool, string, error) {
		_, err := os.Stat(socket)
		return err == nil, fmt.Sprint(err), nil
	}); err != nil {
		t.Fatal(err)
	}
	// Stop what containerd still runs before it stops (cleanups run last
	// first: this one before containerd's).
	t.Cleanup(func() { n.killTasks(t) })
	return socket
}

// pauseProgram is the sandbox's process: it waits for SIGTERM.
const pauseProgram = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

// buildPause builds the pause image FROM scratch and saves it as an OCI
// archive, which it returns.
func (n *node) buildPause(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(n.dir, "pause")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "main.go"), pauseProgram)
	write(t, filepath.Join(dir, "go.mod"), "module pause\n\ngo 1.26\n")
	write(t, filepath.Join(dir, "Containerfile"), "FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT [\"/pause\"]\n")
	n.command(t, dir, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath", "-o", "pause", ".")
	podman := []string{"podman", "--runtime", "/usr/sbin/runc"}
	n.command(t, dir, nil, append(podman, "build", "-t", pauseImage, ".")...)
	archive := filepath.Join(n.dir, "pause.tar")
	n.command(t, dir, nil, append(podman, "save", "--format", "oci-archive", "-o", archive, pauseImage)...)
	return archive
}

// importImage imports an OCI archive into containerd's k8s.io namespace.
func (n *node) importImage(t *testing.T, archive string) {
	t.Helper()
	n.command(t, n.dir, nil, "ctr", "--address", n.socket, "-n", k8sNamespace, "images", "import", archive)
}

// killTasks kills the containers containerd still runs, so that none
// outlives the test.
func (n *node) killTasks(t *testing.T) {
	t.Helper()
	out, err := run(n.dir, nil, "ctr", "--address", n.socket, "-n", k8sNamespace, "tasks", "list", "-q")
	if err != nil {
		t.Logf("listing containerd's tasks: %v", err)
		return
	}
	for _, id := range strings.Fields(out) {
		if _, err := run(n.dir, nil, "ctr", "--address", n.socket, "-n", k8sNamespace, "tasks", "kill", "-s", "SIGKILL", id); err != nil {
			t.Logf("killing task %s: %v", id, err)
		}
	}
}

// deletePods deletes every Deployment, DaemonSet and pod, and waits
// (bounded) until the kubelet stopped the pods: the controllers, which
// still run, would replace pods deleted alone.
func (n *node) deletePods(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
	defer cancel()
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.DaemonSetList{}} {
		if err := n.k8s.List(ctx, list); err != nil {
			t.Logf("listing workloads: %v", err)
			continue
		}
		if err := meta.EachListItem(list, func(o runtime.Object) error {
			return client.IgnoreNotFound(n.k8s.Delete(ctx, o.(client.Object)))
		}); err != nil {
			t.Logf("deleting workloads: %v", err)
		}
	}
	var pods corev1.PodList
	if err := n.k8s.List(ctx, &pods); err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for i := range pods.Items {
		if err := n.k8s.Delete(ctx, &pods.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting pod %s/%s: %v", pods.Items[i].Namespace, pods.Items[i].Name, err)
		}
	}
	_ = supervise.Poll(ctx, podTimeout, "every pod gone", func() (bool, string, error) {
		var left corev1.PodList
		if err := n.k8s.List(ctx, &left); err != nil {
			return false, err.Error(), nil
		}
		return len(left.Items) == 0, fmt.Sprintf("%d pods left", len(left.Items)), nil
	})
}

// awaitNodeReady waits until the node registered and reports Ready.
func (n *node) awaitNodeReady(t *testing.T) {
	t.Helper()
	err := supervise.Poll(context.Background(), nodeReadyTimeout, "node "+nodeName+" Ready", func() (bool, string, error) {
		var nd corev1.Node
		if err := n.k8s.Get(context.Background(), client.ObjectKey{Name: nodeName}, &nd); err != nil {
			return false, err.Error(), nil
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, c.Reason + ": " + c.Message, nil
			}
		}
		return false, "no Ready condition", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// awaitReady waits until exactly one pod that is not being deleted matches
// labels in namespace, and it runs with every container ready, and returns
// it.
func (n *node) awaitReady(t *testing.T, namespace string, labels map[string]string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	what := fmt.Sprintf("one pod %v in %s running and ready", labels, namespace)
	err := supervise.Poll(context.Background(), podTimeout, what, func() (bool, string, error) {
		var pods corev1.PodList
		if err := n.k8s.List(context.Background(), &pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
			return false, "", err
		}
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return false, fmt.Sprintf("%d pods", len(live)), nil
		}
		pod = live[0]
		if pod.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%s: phase %s %+v", pod.Name, pod.Status.Phase, pod.Status.ContainerStatuses), nil
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, pod.Name + ": " + c.Reason + ": " + c.Message, nil
			}
		}
		return false, pod.Name + ": no Ready condition", nil
	})
	if err != nil {
		var events corev1.EventList
		_ = n.k8s.List(context.Background(), &events, client.InNamespace(namespace))
		for _, e := range events.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
		t.Fatal(err)
	}
	return &pod
}

// routerPod returns the router's pod once it is the only one and ready.
func (n *node) routerPod(t *testing.T) *corev1.Pod {
	t.Helper()
	return n.awaitReady(t, "sluice-router", map[string]string{"app.kubernetes.io/component": "router"})
}

// command runs a program in dir, failing the test with its output.
func (n *node) command(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	if _, err := run(dir, env, args...); err != nil {
		t.Fatal(err)
	}
}

// run runs a program in dir with env added to the test's environment and
// returns its standard output; an error carries the program's output.
func run(dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...) //nolint:gosec // the test's own commands.
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("reading the mounts: %v", err)
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		// The fifth field is the mount point.
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", p, err)
		}
	}
}

// write writes a file the test owns.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// projectImage imports the OCI archive of one of the project's images
// (`make docker-save` writes them into out/images) and returns its
// reference, which the Makefile passes as SLUICE_E2E_IMAGE_<NAME>.
func (n *node) projectImage(t *testing.T, name string) string {
	t.Helper()
	ref := os.Getenv("SLUICE_E2E_IMAGE_" + strings.ToUpper(name))
	if ref == "" {
		t.Fatalf("SLUICE_E2E_IMAGE_%s is not set: run the test with `make e2e-cluster`", strings.ToUpper(name))
	}
	dir := os.Getenv("SLUICE_E2E_IMAGES")
	if dir == "" {
		dir = filepath.Join(repoRoot, "out", "images")
	}
	n.importImage(t, filepath.Join(dir, "sluice-"+name+".tar"))
	return ref
}
