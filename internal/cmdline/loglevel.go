package cmdline

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
)

// LogLevelFlag is the name of the log level flag of every program that
// logs.
const LogLevelFlag = "log-level"

// logLevels are the values --log-level accepts, in any case, and the
// levels they name.
var logLevels = []struct {
	name  string
	level slog.Level
}{
	{"debug", slog.LevelDebug},
	{"info", slog.LevelInfo},
	{"warn", slog.LevelWarn},
	{"error", slog.LevelError},
}

// logLevel is the flag.Value of --log-level.
type logLevel struct{ level *slog.Level }

// String returns the level's lowercase name.
func (l logLevel) String() string {
	if l.level == nil {
		return ""
	}
	for _, v := range logLevels {
		if v.level == *l.level {
			return v.name
		}
	}
	return strings.ToLower(l.level.String())
}

// Set accepts debug, info, warn or error in any case.
func (l logLevel) Set(s string) error {
	for _, v := range logLevels {
		if strings.EqualFold(s, v.name) {
			*l.level = v.level
			return nil
		}
	}
	return fmt.Errorf("%q is not a log level: use debug, info, warn or error", s)
}

// LogLevel registers --log-level on c, setting level (which holds the
// default) from debug, info, warn or error, accepted in any case.
func (c *Command) LogLevel(level *slog.Level) {
	c.Flags.Var(logLevel{level}, LogLevelFlag, "the `level` of the logs: debug, info, warn or error (any case)")
}

var _ flag.Value = logLevel{}

// HumanDurations is a slog.HandlerOptions.ReplaceAttr that writes every
// duration in human units ("5s", "1.2ms"), as time.Duration.String does,
// instead of the JSON handler's integer nanoseconds: what a program logs
// reads the same in JSON as in text, and as its documentation writes it.
func HumanDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
