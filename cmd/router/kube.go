package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/status"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// userAgent identifies the router's requests in API server audit logs.
const userAgent = "sluice-router"

// kubeFlags are the flags of the kube source.
type kubeFlags struct {
	kubeconfig string
}

// register adds the kube source's flags to fs.
func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "",
		"kubeconfig of the kube source (default: $KUBECONFIG, then the in-cluster service account, then ~/.kube/config); ignored with --tiers-dir")
}

// tierSource is what the router runs to receive snapshots: source.Files
// with --tiers-dir, kubeSource otherwise.
type tierSource interface {
	Run(ctx context.Context, publish func(source.Snapshot)) error
}

// hostAddrs is where the router reads this host's addresses for the
// SameHost member check (router.Options.HostAddrs): the interface
// addresses, in both modes. In kube mode the router runs in its DaemonSet
// with hostNetwork: true (config/router/daemonset.yaml and the chart's
// router template), so its interfaces are the node's: a member endpoint on
// any address of the node is on this host, one on a pod IP or on another
// node's address is not. They are read when a snapshot is applied, not
// polled (docs/ROUTER.md#5-configuration-changes).
func hostAddrs() tiers.HostAddrs { return tiers.InterfaceAddrs }

// newTierSource returns the files source when --tiers-dir is set and the
// kube source otherwise; the kube source reports status through admin's
// capacity view. It contacts nothing yet.
func newTierSource(cfg config, logger *slog.Logger, admin *adminserver.Admin) (tierSource, error) {
	if cfg.tiersDir != "" {
		return source.NewFiles(source.FilesOptions{Dir: cfg.tiersDir, NodeName: cfg.nodeName, Interval: cfg.pollInterval})
	}
	restCfg, err := kubeRESTConfig(cfg.kube.kubeconfig)
	if err != nil {
		return nil, err
	}
	restCfg.UserAgent = userAgent
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kube source: %w", err)
	}
	// client-go logs through klog; send it to the router's structured log.
	klog.SetSlogLogger(logger)
	kube, err := source.NewKube(source.KubeOptions{
		NodeName:      cfg.nodeName,
		ListerWatcher: source.NewTierListerWatcher(c, cfg.nodeName),
		Logger:        logger,
	})
	if err != nil {
		return nil, err
	}
	view := status.NewRouterView(admin)
	reporter, err := status.NewReporter(status.Options{
		Writer: status.NewAPIWriter(c),
		Node:   cfg.nodeName,
		View:   view,
		Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	logger.Info("kube source configured", "node", cfg.nodeName)
	return &kubeSource{kube: kube, reporter: reporter}, nil
}

// statusReporting is a tier source that reports status and can stop.
type statusReporting interface {
	// StopReporting stops the status reports for good and returns once no
	// write is in progress.
	StopReporting()
}

// kubeSource runs the kube source and the status reporter together: every
// snapshot is published (applied by the router), and then the reporter
// compares what the router applies with what it wrote. StopReporting
// stops the reporter while the source keeps running: a router that shuts
// down or handed its admission over leaves the node's status to the
// router replacing it (docs/ROUTER.md#81-handing-the-ports-over).
type kubeSource struct {
	kube     tierSource
	reporter interface {
		Run(ctx context.Context) error
		Notify()
	}

	mu         sync.Mutex
	stopped    bool               // StopReporting ran.
	stopReport context.CancelFunc // cancels the running reporter; nil when none runs.
	reportDone chan struct{}      // closed when the running reporter returned.
}

// Run runs the source and the reporter until ctx ends or the source fails,
// and returns after both stopped.
func (k *kubeSource) Run(ctx context.Context, publish func(source.Snapshot)) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	k.mu.Lock()
	if k.stopped {
		rcancel()
	}
	k.stopReport, k.reportDone = rcancel, done
	k.mu.Unlock()
	wg.Go(func() {
		defer close(done)
		if rctx.Err() == nil {
			_ = k.reporter.Run(rctx)
		}
	})
	return k.kube.Run(ctx, func(s source.Snapshot) {
		publish(s)
		k.reporter.Notify()
	})
}

// StopReporting stops the status reporter for good and waits until it
// returned; the source keeps running.
func (k *kubeSource) StopReporting() {
	k.mu.Lock()
	k.stopped = true
	stop, done := k.stopReport, k.reportDone
	k.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// errNoKubeconfig is returned when neither --tiers-dir nor any Kubernetes
// configuration is available.
var errNoKubeconfig = errors.New("no --tiers-dir, and no kubeconfig or in-cluster service account for the kube source")

// kubeRESTConfig loads the kube source's configuration: the --kubeconfig
// file, else $KUBECONFIG, else the in-cluster service account, else
// ~/.kube/config.
func kubeRESTConfig(path string) (*rest.Config, error) {
	if path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		return c, nil
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if c, err := rest.InClusterConfig(); err == nil {
			return c, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	c, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errNoKubeconfig
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return c, nil
}
