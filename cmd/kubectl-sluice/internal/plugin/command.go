package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/transition"
	"github.com/sluice-dev/sluice/internal/version"
)

// DefaultDrainTimeout bounds drain's wait when --timeout is not given: long
// enough for typical streams to finish, short enough that a stuck drain is
// noticed.
const DefaultDrainTimeout = 5 * time.Minute

// Output formats.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// Dry-run modes.
const (
	dryRunNone   = "none"
	dryRunServer = "server"
)

// ErrNoKubeconfig is returned, before anything is contacted, when no
// Kubernetes configuration is found: client-go would otherwise fall back to
// http://localhost:8080, which on a GPU node is a sluice router's front
// door.
var ErrNoKubeconfig = errors.New("no Kubernetes configuration: set KUBECONFIG or --kubeconfig, " +
	"create ~/.kube/config, pass --server, or run in a pod with a service account")

// connectFunc builds the API client and returns the namespace to use.
type connectFunc func() (client.WithWatch, string, error)

// NewCommand returns the kubectl-sluice command tree, writing to streams.
// Clients are built from kubectl's standard kubeconfig flags; without a
// kubeconfig, --server or an in-cluster service account every verb that
// needs the API server fails with ErrNoKubeconfig.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	connect := func() (client.WithWatch, string, error) {
		if err := requireConfig(flags); err != nil {
			return nil, "", err
		}
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, "", err
		}
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, "", err
		}
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: newScheme()})
		if err != nil {
			return nil, "", err
		}
		return c, ns, nil
	}
	root := newCommand(streams, connect)
	flags.AddFlags(root.PersistentFlags())
	return root
}

// requireConfig returns ErrNoKubeconfig unless flags lead to a Kubernetes
// configuration: a kubeconfig with content (--kubeconfig, $KUBECONFIG or
// ~/.kube/config), an explicit --server, or the in-cluster service
// account. A kubeconfig that cannot be read returns its own error.
func requireConfig(flags *genericclioptions.ConfigFlags) error {
	if flags.APIServer != nil && *flags.APIServer != "" {
		return nil
	}
	raw, err := flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return err
	}
	if !clientcmdapi.IsConfigEmpty(&raw) {
		return nil
	}
	if _, err := rest.InClusterConfig(); err == nil {
		return nil
	}
	return ErrNoKubeconfig
}

// newScheme returns a scheme knowing the ReplicaTier types.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // unreachable: registering known types cannot fail.
	}
	return s
}

// cli holds what every verb shares.
type cli struct {
	streams genericiooptions.IOStreams
	connect connectFunc
	output  string
}

// newCommand builds the command tree on connect; tests pass a fake client.
func newCommand(streams genericiooptions.IOStreams, connect connectFunc) *cobra.Command {
	c := &cli{streams: streams, connect: connect}
	root := &cobra.Command{
		Use: "kubectl-sluice",
		// Usage lines read as the user types them: "kubectl sluice status
		// TIER", as kubectl's plugin guide asks.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sluice"},
		Short:       "Inspect and change the admission of sluice ReplicaTiers",
		Long: "kubectl sluice reads a ReplicaTier's status as the router on its node reports it,\n" +
			"quiesces, readmits or drains a tier or one member by patching spec.quiesce, and\n" +
			"summarizes a router's decision log files.",
		Example: "  # a tier's members, their readiness, phase and quiesce intent\n" +
			"  kubectl sluice status llama-70b -n inference\n" +
			"  # take one member out for maintenance, then wait until it holds no request\n" +
			"  kubectl sluice drain llama-70b --member gpu1 -n inference",
		Version:           version.Version(),
		SilenceUsage:      true,
		SilenceErrors:     true, // Execute prints them, with the exit status they get.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	// --version without cobra's -v shorthand: kubectl's -v is its verbosity.
	root.Flags().Bool("version", false, "print the version and revision and exit")
	root.SetVersionTemplate(version.String("kubectl-sluice") + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdline.Usagef("%w", err) })
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.PersistentFlags().StringVarP(&c.output, "output", "o", outputTable, "output format: table or json")
	root.AddCommand(c.statusCommand(), c.quiesceCommand(), c.readmitCommand(), c.drainCommand(), c.decisionsCommand(), c.mcpCommand())
	markFailures(root)
	return root
}

// Execute runs the command tree and returns the process's exit status:
// 0, 1 when a command failed (after printing "error: ..."), 2 for a usage
// error (an unknown command or flag, a bad flag value, a missing or extra
// argument), printed with a hint to run --help.
func Execute(root *cobra.Command) int {
	cmd, err := root.ExecuteC()
	if err == nil {
		return cmdline.ExitOK
	}
	var f failure
	if errors.As(err, &f) {
		fmt.Fprintln(root.ErrOrStderr(), "error:", f.err)
		return cmdline.ExitFailure
	}
	fmt.Fprintf(root.ErrOrStderr(), "error: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return cmdline.ExitUsage
}

// failure is the error of a command that ran: anything else cobra returns
// (flags, arguments, unknown commands) is a usage error.
type failure struct{ err error }

func (f failure) Error() string { return f.err.Error() }

// Unwrap returns the command's error.
func (f failure) Unwrap() error { return f.err }

// markFailures makes every command's errors failures, except the usage
// errors a command finds in its flags' values (cmdline.Usagef).
func markFailures(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			if err == nil || errors.Is(err, cmdline.ErrUsage) {
				return err
			}
			return failure{err}
		}
	}
	for _, sub := range cmd.Commands() {
		markFailures(sub)
	}
}

// tierArg accepts exactly one TIER argument, with a message that says a
// member needs its tier.
func tierArg(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 1:
		return nil
	case len(args) == 0 && cmd.Flags().Changed("member"):
		return cmdline.Usagef("--member needs its TIER: kubectl sluice %s TIER --member ID", cmd.Name())
	case len(args) == 0:
		return cmdline.Usagef("a TIER argument is required")
	}
	return cmdline.Usagef("exactly one TIER argument is allowed, got %d", len(args))
}

// setup checks the output flag and connects.
func (c *cli) setup(dryRun string) (*transition.Client, error) {
	if c.output != outputTable && c.output != outputJSON {
		return nil, cmdline.Usagef("--output must be %s or %s", outputTable, outputJSON)
	}
	if dryRun != dryRunNone && dryRun != dryRunServer {
		return nil, cmdline.Usagef("--dry-run must be %s or %s", dryRunNone, dryRunServer)
	}
	cl, ns, err := c.connect()
	if err != nil {
		return nil, err
	}
	return &transition.Client{Client: cl, Namespace: ns, DryRun: dryRun == dryRunServer}, nil
}

func (c *cli) statusCommand() *cobra.Command {
	var member string
	cmd := &cobra.Command{
		Use:   "status TIER [--member ID]",
		Short: "Show a tier's acceptance, router generation, and each member's readiness, phase and quiesce intent",
		Example: "  kubectl sluice status llama-70b -n inference\n" +
			"  kubectl sluice status llama-70b --member gpu1 -o json",
		Args: tierArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := c.setup(dryRunNone)
			if err != nil {
				return err
			}
			t, err := tc.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if member != "" {
				if err := transition.MemberExists(t, member); err != nil {
					return err
				}
			}
			return c.print(transition.NewStatus(t, member), "")
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "show only this member")
	return cmd
}

func (c *cli) quiesceCommand() *cobra.Command {
	var member, reason, dryRun string
	cmd := &cobra.Command{
		Use:   "quiesce TIER [--member ID] --reason R",
		Short: "Stop admitting new requests to a tier or one member; requests in flight finish",
		Example: "  kubectl sluice quiesce llama-70b --member gpu1 --reason maintenance\n" +
			"  kubectl sluice quiesce llama-70b --reason rollout --dry-run server",
		Args: tierArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := c.setup(dryRun)
			if err != nil {
				return err
			}
			t, msg, err := tc.Quiesce(cmd.Context(), args[0], member, reason)
			if err != nil {
				return err
			}
			return c.print(transition.NewStatus(t, member), msg)
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "quiesce only this member")
	cmd.Flags().StringVar(&reason, "reason", "", "why, as a short lowercase word such as maintenance (required)")
	cmd.Flags().StringVar(&dryRun, "dry-run", dryRunNone, "server: send the change as a server-side dry run")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func (c *cli) readmitCommand() *cobra.Command {
	var member, dryRun string
	cmd := &cobra.Command{
		Use:     "readmit TIER [--member ID]",
		Short:   "Admit new requests again to a tier or one member; the other scope's intent is untouched",
		Example: "  kubectl sluice readmit llama-70b --member gpu1",
		Args:    tierArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := c.setup(dryRun)
			if err != nil {
				return err
			}
			t, msg, err := tc.Readmit(cmd.Context(), args[0], member)
			if err != nil {
				return err
			}
			return c.print(transition.NewStatus(t, member), msg)
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "readmit only this member")
	cmd.Flags().StringVar(&dryRun, "dry-run", dryRunNone, "server: send the change as a server-side dry run")
	return cmd
}

func (c *cli) drainCommand() *cobra.Command {
	var member, dryRun string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain TIER [--member ID] [--timeout D]",
		Short: "Quiesce a tier or member if needed, then wait until the router reports it Drained",
		Long: "drain quiesces the scope with reason \"" + transition.DefaultDrainReason + "\" unless it is already quiesced, then\n" +
			"watches the tier until the router on its node applies the current generation and reports\n" +
			"every member of the scope Drained (no request in flight). It never cancels a request.",
		Example: "  kubectl sluice drain llama-70b --member gpu1 --timeout 10m",
		Args:    tierArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return cmdline.Usagef("--timeout must be positive")
			}
			tc, err := c.setup(dryRun)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			t, msg, err := tc.Drain(ctx, args[0], member, timeout)
			if err != nil {
				return err
			}
			return c.print(transition.NewStatus(t, member), msg)
		},
	}
	cmd.Flags().StringVar(&member, "member", "", "drain only this member")
	cmd.Flags().DurationVar(&timeout, "timeout", DefaultDrainTimeout, "how long to wait for the scope to drain")
	cmd.Flags().StringVar(&dryRun, "dry-run", dryRunNone, "server: send the quiesce as a server-side dry run and do not wait")
	return cmd
}

// usageArgs makes the errors of a cobra argument check usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return cmdline.Usagef("%w", err)
		}
		return nil
	}
}
