package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/version"
)

// Exit statuses shared by every program.
const (
	// ExitOK: the program did its work, or printed the help or version
	// asked for.
	ExitOK = 0
	// ExitFailure: the program failed after its command line was accepted.
	ExitFailure = 1
	// ExitUsage: the command line was wrong (unknown flag, bad value,
	// missing or extra argument); nothing was started or changed.
	ExitUsage = 2
)

var (
	// ErrHelp is returned by Parse after it printed the help that -h or
	// --help asked for. It is flag.ErrHelp, so callers that checked for
	// that keep working.
	ErrHelp = flag.ErrHelp
	// ErrVersion is returned by Parse after it printed the version line
	// that --version asked for.
	ErrVersion = errors.New("cmdline: version printed")
	// ErrUsage is wrapped by every usage error: Parse's, and those a
	// program finds in its flags' values afterwards (Usagef).
	ErrUsage = errors.New("cmdline: usage error")
)

// usageError is a usage error: its message is what the user reads.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }

// Unwrap returns the cause and ErrUsage.
func (e usageError) Unwrap() []error { return []error{e.err, ErrUsage} }

// Usagef returns a usage error with the formatted message (%w wraps as in
// fmt.Errorf): Report prints it with the hint and exit status 2.
func Usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// Example is one command line of a program's help, with an optional
// comment saying what it does.
type Example struct {
	// Comment, when set, is printed as a "# " line above the command.
	Comment string
	// Command is the command line, as a user types it.
	Command string
}

// Help is what a program's help says besides its flags.
type Help struct {
	// Name is the program's name, in its usage line and messages.
	Name string
	// Synopsis follows the name in the usage line, e.g. "[flags]".
	Synopsis string
	// Summary says what the program does, in one paragraph or a few.
	Summary string
	// Examples are printed under "Examples:"; every program has at least
	// one.
	Examples []Example
}

// Command is a program's flag set with the shared conventions: --version,
// help on stdout, usage errors returned rather than printed, and
// deprecated aliases.
type Command struct {
	help Help
	// Flags is the program's flag set: register the program's flags on it
	// before Parse.
	Flags       *flag.FlagSet
	showVersion bool
	// deprecated maps an old flag name to the name that replaces it.
	deprecated map[string]string
}

// New returns the Command of a program, its flag set holding --version.
func New(h Help) *Command {
	c := &Command{help: h, Flags: flag.NewFlagSet(h.Name, flag.ContinueOnError), deprecated: map[string]string{}}
	// The flag package prints its errors and the usage itself; Parse
	// returns them instead, and Report prints one line.
	c.Flags.SetOutput(io.Discard)
	c.Flags.Usage = func() {}
	c.Flags.BoolVar(&c.showVersion, "version", false, "print the version and revision and exit")
	return c
}

// Alias registers old as a deprecated spelling of the registered flag
// name: both set the same value, the help marks old as deprecated, and
// Parse prints a note once when old is used.
func (c *Command) Alias(old, name string) {
	f := c.Flags.Lookup(name)
	if f == nil {
		panic("cmdline: alias of an unregistered flag --" + name) // a programming error, caught by any run.
	}
	c.Flags.Var(f.Value, old, "")
	c.Deprecate(old, name)
}

// Deprecate marks the registered flag old as replaced by name, for a flag
// that cannot share name's value (one a library registers): the help
// marks it deprecated and Parse prints a note once when it is used; the
// program decides how the two combine.
func (c *Command) Deprecate(old, name string) {
	f := c.Flags.Lookup(old)
	if f == nil {
		panic("cmdline: deprecating an unregistered flag --" + old) // a programming error, caught by any run.
	}
	note := "deprecated: use --" + name + "; removed in the next release"
	if f.Usage != "" {
		note += " (" + f.Usage + ")"
	}
	f.Usage = note
	c.deprecated[old] = name
}

// Parse parses args. It returns nil when the program should run. With -h
// or --help it prints the help to stdout and returns ErrHelp; with
// --version it prints the version line to stdout and returns ErrVersion; a
// command line the flag package refuses returns a usage error, printed by
// Report. Each deprecated alias used gets one note on stderr.
func (c *Command) Parse(args []string, stdout, stderr io.Writer) error {
	if err := c.Flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.PrintHelp(stdout)
			return ErrHelp
		}
		return usageError{err}
	}
	if c.showVersion {
		_, _ = fmt.Fprintln(stdout, version.String(c.help.Name))
		return ErrVersion
	}
	c.Flags.Visit(func(f *flag.Flag) {
		if name, ok := c.deprecated[f.Name]; ok {
			_, _ = fmt.Fprintf(stderr, "%s: --%s is deprecated and will be removed in the next release; use --%s\n", c.help.Name, f.Name, name)
		}
	})
	return nil
}

// IsSet reports whether the command line set the flag name.
func (c *Command) IsSet(name string) bool {
	set := false
	c.Flags.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// PrintHelp writes the help: the usage line, the summary, the flags and
// the examples.
func (c *Command) PrintHelp(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s %s\n\n", c.help.Name, c.help.Synopsis)
	if c.help.Summary != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.help.Summary))
	}
	b.WriteString("Flags:\n")
	c.Flags.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		b.WriteString("  --" + f.Name)
		if arg != "" {
			b.WriteString(" " + arg)
		}
		b.WriteString("\n      " + usage)
		if !slices.Contains([]string{"", "0", "0s", "false"}, f.DefValue) {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteString("\n")
	})
	b.WriteString("\nExamples:\n")
	for _, e := range c.help.Examples {
		if e.Comment != "" {
			b.WriteString("  # " + e.Comment + "\n")
		}
		b.WriteString("  " + e.Command + "\n")
	}
	_, _ = io.WriteString(w, b.String())
}

// Report prints how a program ended and returns its exit status: nothing
// and 0 when err is nil, ErrHelp or ErrVersion (Parse printed what was
// asked); "NAME: error" and a hint to run --help, and 2, for a usage
// error; "NAME: error" and 1 for any other error.
func Report(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, ErrHelp), errors.Is(err, ErrVersion):
		return ExitOK
	case errors.Is(err, ErrUsage):
		_, _ = fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, name)
		return ExitUsage
	}
	_, _ = fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return ExitFailure
}
