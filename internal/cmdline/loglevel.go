package cmdline

import (
	"flag"
	"fmt"
	"io"
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

// LogFormatFlag is the name of the log format flag of every program that
// logs.
const LogFormatFlag = "log-format"

// Log formats: every server logs one JSON object a line by default
// (log/slog's JSON handler, or the manager's zap encoder with the same
// keys); text is for a person at a terminal.
const (
	// LogJSON is one JSON object a line: "time", "level", "msg", then the
	// record's fields.
	LogJSON = "json"
	// LogText is log/slog's key=value text (the manager's zap console
	// encoder).
	LogText = "text"
)

// Logging is the logging a program's command line chose: its level and
// format.
type Logging struct {
	// Level is the least level logged; info unless --log-level says.
	Level slog.Level
	// Format is LogJSON (the default) or LogText.
	Format string
}

// logFormat is the flag.Value of --log-format.
type logFormat struct{ format *string }

// String returns the format's name.
func (f logFormat) String() string {
	if f.format == nil {
		return ""
	}
	return *f.format
}

// Set accepts json or text in any case.
func (f logFormat) Set(s string) error {
	for _, v := range []string{LogJSON, LogText} {
		if strings.EqualFold(s, v) {
			*f.format = v
			return nil
		}
	}
	return fmt.Errorf("%q is not a log format: use json or text", s)
}

var _ flag.Value = logFormat{}

// Logging registers --log-level and --log-format on c, setting l; l's
// zero value means info and JSON.
func (c *Command) Logging(l *Logging) {
	if l.Format == "" {
		l.Format = LogJSON
	}
	c.LogLevel(&l.Level)
	c.Flags.Var(logFormat{&l.Format}, LogFormatFlag, "the `format` of the logs: json (one object a line) or text")
}

// Logger returns a log/slog logger writing to w at l's level, in l's
// format, with durations in human units.
func (l Logging) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.Level, ReplaceAttr: HumanDurations}
	if l.Format == LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
