// Command manager runs the ReplicaTier controller: it validates tiers and
// writes their admission intent and conditions to status.
package main

import (
	"io"
	"log/slog"
	"os"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/controller"
	"github.com/sluice-dev/sluice/internal/managermetrics"
	"github.com/sluice-dev/sluice/internal/version"
)

// help is the manager's help besides its flags.
var help = cmdline.Help{
	Name:     "manager",
	Synopsis: "[flags]",
	Summary: "manager runs the ReplicaTier controller: it validates tiers and writes their admission\n" +
		"intent and conditions to status. It reads the cluster from --kubeconfig, $KUBECONFIG, the\n" +
		"in-cluster service account or ~/.kube/config (docs/KUBERNETES.md).",
	Examples: []cmdline.Example{
		{Comment: "against a local cluster, metrics over plain HTTP on loopback", Command: "manager --kubeconfig out/devcluster/kubeconfig --metrics-bind-address 127.0.0.1:8443 --metrics-secure=false"},
		{Comment: "in the cluster, two replicas with one leader", Command: "manager --leader-elect --log-level debug"},
	},
}

// options is the parsed command line.
type options struct {
	metrics     managermetrics.Flags
	probeAddr   string
	leaderElect bool
	leaseNS     string
	zap         zap.Options
	// logging is --log-level and --log-format; zap applies them.
	logging cmdline.Logging
}

// zapLevels maps each --log-level to controller-runtime's (zap's) level.
var zapLevels = map[slog.Level]zapcore.Level{
	slog.LevelDebug: zapcore.DebugLevel,
	slog.LevelInfo:  zapcore.InfoLevel,
	slog.LevelWarn:  zapcore.WarnLevel,
	slog.LevelError: zapcore.ErrorLevel,
}

// parseFlags parses args (cmdline.Parse: help and version to stdout,
// deprecation notes to stderr). --log-level sets the level; without it the
// deprecated --zap-log-level (or --zap-devel's default) still does.
// --log-format sets the encoder; without it the deprecated --zap-encoder
// (or --zap-devel's console) still does, and JSON is the default.
func parseFlags(args []string, stdout, stderr io.Writer) (options, error) {
	var o options
	cmd := cmdline.New(help)
	fs := cmd.Flags
	// --kubeconfig, which ctrl.GetConfigOrDie reads.
	config.RegisterFlags(fs)
	o.metrics.BindFlags(fs)
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one active manager among replicas")
	fs.StringVar(&o.leaseNS, "leader-election-namespace", "", "namespace of the leader election lease; empty means the pod's namespace")
	cmd.Logging(&o.logging)
	o.zap.BindFlags(fs)
	cmd.Deprecate(zapLogLevelFlag, cmdline.LogLevelFlag)
	cmd.Deprecate(zapEncoderFlag, cmdline.LogFormatFlag)
	if err := cmd.Parse(args, stdout, stderr); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, cmdline.Usagef("unexpected arguments %q", fs.Args())
	}
	if cmd.IsSet(cmdline.LogLevelFlag) {
		o.zap.Level = zapLevels[o.logging.Level]
	}
	if cmd.IsSet(cmdline.LogFormatFlag) {
		o.zap.NewEncoder = zapEncoders[o.logging.Format]
	}
	// The keys and units of the other programs' log/slog lines: "time",
	// "level" in capitals, "msg", durations as "5s".
	o.zap.EncoderConfigOptions = append(o.zap.EncoderConfigOptions, func(c *zapcore.EncoderConfig) {
		c.TimeKey, c.LevelKey, c.MessageKey = "time", "level", "msg"
		c.EncodeLevel = zapcore.CapitalLevelEncoder
		c.EncodeDuration = zapcore.StringDurationEncoder
	})
	return o, nil
}

// zapEncoders maps each --log-format to the zap encoder of the same
// family.
var zapEncoders = map[string]zap.NewEncoderFunc{
	cmdline.LogJSON: func(opts ...zap.EncoderConfigOption) zapcore.Encoder {
		c := uberzap.NewProductionEncoderConfig()
		for _, opt := range opts {
			opt(&c)
		}
		return zapcore.NewJSONEncoder(c)
	},
	cmdline.LogText: func(opts ...zap.EncoderConfigOption) zapcore.Encoder {
		c := uberzap.NewDevelopmentEncoderConfig()
		for _, opt := range opts {
			opt(&c)
		}
		return zapcore.NewConsoleEncoder(c)
	},
}

// zapLogLevelFlag is controller-runtime's log level flag, a deprecated
// alias of --log-level since sluice's programs share that one.
const zapLogLevelFlag = "zap-log-level"

// zapEncoderFlag is controller-runtime's encoder flag, a deprecated alias of
// --log-format.
const zapEncoderFlag = "zap-encoder"

func main() {
	o, err := parseFlags(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		os.Exit(cmdline.Report(help.Name, err, os.Stderr))
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	metricsOpts, err := o.metrics.ServerOptions()
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
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "manager.sluice.dev",
		LeaderElectionNamespace: o.leaseNS,
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
