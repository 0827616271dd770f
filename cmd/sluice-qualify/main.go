// Command sluice-qualify qualifies one ReplicaTier on its node before it
// takes production traffic (docs/QUALIFICATION.md). Without --plan or
// --execute it refuses to run; --plan prints every step and changes
// nothing; --execute runs them and writes the report. It never promotes.
//
// Exit status: 0 when the plan was printed or the verdict is pass, 1 when
// the verdict is fail (interrupted runs included), 2 for usage or setup
// errors (nothing was changed).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/qualify"
)

// Exit statuses.
const (
	exitPass  = 0
	exitFail  = 1
	exitUsage = 2
)

// defaultRouterURL is the router's front door on its node (hostNetwork,
// --listen :8080).
const defaultRouterURL = "http://127.0.0.1:8080"

// help is the program's help besides its flags.
var help = cmdline.Help{
	Name:     "sluice-qualify",
	Synopsis: "--tier NAMESPACE/NAME (--plan | --execute) [flags]",
	Summary: "sluice-qualify qualifies one ReplicaTier on its node before it takes production traffic\n" +
		"(docs/QUALIFICATION.md): --plan prints every step and changes nothing, --execute runs them\n" +
		"and writes the report. It never promotes. Exit status: 0 plan printed or verdict pass,\n" +
		"1 verdict fail, 2 usage or setup error (nothing was changed).",
	Examples: []cmdline.Example{
		{Comment: "print the steps; nothing changes", Command: "sluice-qualify --tier inference/llama-70b --plan"},
		{Comment: "run them with the router's key and admin token", Command: "sluice-qualify --tier inference/llama-70b --execute " +
			"--api-keys-file /etc/sluice/api-keys/keys --admin-token-file /etc/sluice/admin-token/token --router-admin-url http://127.0.0.1:9090"},
	},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, connect)
	stop()
	os.Exit(code)
}

// connectFunc returns the API client of a kubeconfig path (empty: the
// default loading rules, then the in-cluster service account).
type connectFunc func(kubeconfig string) (client.WithWatch, error)

// connect builds the client from the kubeconfig.
func connect(kubeconfig string) (client.WithWatch, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: s})
}

// run is the command without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, connect connectFunc) int {
	cmd := cmdline.New(help)
	fs := cmd.Flags
	var (
		o                            qualify.Options
		tier, kubeconfig             string
		adminTokenFile, apiKeysFile  string
		plan, execute                bool
		duration, sustain, drainWait time.Duration
	)
	fs.StringVar(&tier, "tier", "", "the ReplicaTier to qualify, as namespace/name (required)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default $KUBECONFIG, then the in-cluster service account, then ~/.kube/config")
	fs.StringVar(&o.RouterURL, "router-url", defaultRouterURL, "the router's front door on this node")
	fs.StringVar(&o.AdminURL, "router-admin-url", "", "the router's admin listener, for its decision summary (optional)")
	fs.StringVar(&adminTokenFile, "admin-token-file", "", "file holding the admin listener's bearer token")
	fs.StringVar(&apiKeysFile, "api-keys-file", "", "file of the front door's bearer API keys, as the router's --api-keys-file; the first key is used")
	cmd.Alias("api-key-file", "api-keys-file")
	fs.DurationVar(&duration, "duration", qualify.DefaultDuration, "length of the direct and of the routed phase")
	fs.DurationVar(&sustain, "sustain", qualify.DefaultSustain, "length of the routed phase with the drain")
	fs.DurationVar(&drainWait, "drain-timeout", qualify.DefaultDrainTimeout, "how long the drained member may take to reach Drained")
	fs.StringVar(&o.DrainMember, "drain-member", "", "the member to quiesce and drain (default: the first member)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "routed load (default: the tier's ceiling)")
	fs.IntVar(&o.MaxTokens, "max-tokens", qualify.DefaultMaxTokens, "output tokens of each request")
	fs.StringVar(&o.OutDir, "out", "", "directory for report.json, chart.svg and summary.txt (default qualification-NAMESPACE-NAME)")
	fs.BoolVar(&plan, "plan", false, "print every step and change nothing")
	fs.BoolVar(&execute, "execute", false, "run the qualification")
	if err := cmd.Parse(args, stdout, stderr); err != nil {
		return cmdline.Report(help.Name, err, stderr)
	}
	// usage reports an error of setup (nothing was changed) with the
	// usage status.
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice-qualify: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return cmdline.Report(help.Name, cmdline.Usagef("unexpected arguments %q", fs.Args()), stderr)
	case plan == execute:
		return cmdline.Report(help.Name, cmdline.Usagef("give exactly one of --plan (print the steps, change nothing) or --execute (run them)"), stderr)
	}
	ns, name, ok := strings.Cut(tier, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return cmdline.Report(help.Name, cmdline.Usagef("--tier must be namespace/name, got %q", tier), stderr)
	}
	o.Namespace, o.Name = ns, name
	o.Duration, o.Sustain, o.DrainTimeout = duration, sustain, drainWait
	if o.OutDir == "" {
		o.OutDir = "qualification-" + ns + "-" + name
	}
	var err error
	if o.AdminToken, err = readSecret(adminTokenFile); err != nil {
		return usage("--admin-token-file: %v", err)
	}
	if o.APIKey, err = readSecret(apiKeysFile); err != nil {
		return usage("--api-keys-file: %v", err)
	}
	if o.Client, err = connect(kubeconfig); err != nil {
		return usage("no Kubernetes configuration: %v", err)
	}
	p, err := qualify.Prepare(ctx, o)
	if err != nil {
		return usage("%v", err)
	}
	if plan {
		if err := p.Write(stdout); err != nil {
			return usage("%v", err)
		}
		return exitPass
	}
	fmt.Fprintf(stdout, "Qualifying %s; interrupt to stop early (the quiesce intent is restored).\n", p.Tier)
	rep, err := p.Execute(ctx)
	if rep == nil {
		return usage("%v", err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "sluice-qualify: %v\n", err)
	}
	if s, rerr := os.ReadFile(o.OutDir + "/" + qualify.SummaryFile); rerr == nil { //nolint:gosec // the run's own output.
		_, _ = stdout.Write(s)
	}
	if rep.Passed() && err == nil {
		return exitPass
	}
	return exitFail
}

// readSecret returns the first line of path that is neither blank nor a
// comment, trimmed; an empty path is no secret.
func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path) //nolint:gosec // the operator's own file.
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("the file holds no token")
}
