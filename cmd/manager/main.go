// Command manager runs the ReplicaTier controller: it validates tiers and
// writes their admission intent and conditions to status.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/managermetrics"
	"github.com/sluice-dev/sluice/internal/version"
)

func main() {
	var (
		metrics     managermetrics.Flags
		probeAddr   string
		leaderElect bool
		leaseNS     string
	)
	metrics.BindFlags(flag.CommandLine)
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect one active manager among replicas")
	flag.StringVar(&leaseNS, "leader-election-namespace", "", "namespace of the leader election lease; empty means the pod's namespace")
	showVersion := flag.Bool("version", false, "print the version and revision and exit")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String("manager"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	metricsOpts, err := metrics.ServerOptions()
	if err != nil {
		log.Error(err, "metrics flags")
		os.Exit(1)
	}

	// Next to controller-runtime's own metrics and the Go runtime and process
	// collectors it registers.
	ctrlmetrics.Registry.MustRegister(version.BuildInfo())

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(sluicev1.AddToScheme(scheme))

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "manager.sluice.dev",
		LeaderElectionNamespace: leaseNS,
	})
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	r := &controller.ReplicaTierReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(controller.FieldManager),
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		log.Error(err, "set up controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "add health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "add ready check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "run manager")
		os.Exit(1)
	}
}
