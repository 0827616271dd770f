package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/sluice-dev/sluice/internal/cmdline"
	"github.com/sluice-dev/sluice/internal/evidence"
)

// stdinName names standard input among summarize's files.
const stdinName = "-"

func (c *cli) decisionsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "decisions",
		Short:   "Read a router's decision log",
		Example: "  kubectl sluice decisions summarize decisions.jsonl",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "summarize FILE...",
		Short: "Summarize decision log files (a router's --decision-log-file and its rotated .1; - reads standard input)",
		Long: "summarize counts the decision records of the files together, as the router's\n" +
			"GET /admin/v1/decisions/summary counts its in-memory ring: per outcome, tier, member,\n" +
			"refusal reason, stream outcome and the winner's pressure freshness. A line that is not a\n" +
			"valid record counts as invalid and is otherwise skipped. No cluster is contacted.",
		Example: "  # a router's --decision-log-file and its rotated previous file, together\n" +
			"  kubectl sluice decisions summarize decisions.jsonl.1 decisions.jsonl\n" +
			"  kubectl sluice decisions summarize - -o json < decisions.jsonl",
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			if c.output != outputTable && c.output != outputJSON {
				return cmdline.Usagef("--output must be %s or %s", outputTable, outputJSON)
			}
			s, err := c.summarize(args)
			if err != nil {
				return err
			}
			return c.printSummary(s)
		},
	})
	return cmd
}

// summarize counts the records of the files, in order, as one stream.
func (c *cli) summarize(files []string) (evidence.Summary, error) {
	readers := make([]io.Reader, 0, 2*len(files))
	for _, name := range files {
		r := c.streams.In
		if name != stdinName {
			f, err := os.Open(name) //nolint:gosec // the user names the files to read.
			if err != nil {
				return evidence.Summary{}, err
			}
			defer func() { _ = f.Close() }()
			r = f
		}
		// A file whose last line lacks its newline does not run into the
		// next file's first: empty lines are skipped.
		readers = append(readers, r, strings.NewReader("\n"))
	}
	s, err := evidence.SummarizeJSONL(io.MultiReader(readers...))
	if err != nil {
		return evidence.Summary{}, fmt.Errorf("reading the decision log: %w", err)
	}
	if s.Records == 0 && s.InvalidRecords > 0 {
		return s, errors.New("no valid decision record in the input")
	}
	return s, nil
}

// printSummary writes s as JSON, or as tables of its counts.
func (c *cli) printSummary(s evidence.Summary) error {
	if c.output == outputJSON {
		enc := json.NewEncoder(c.streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	w := printers.GetNewTabWriter(c.streams.Out)
	fmt.Fprintf(w, "RECORDS\tINVALID RECORDS\tINVALID SCHEDULER PAYLOADS\n%d\t%d\t%d\n", s.Records, s.InvalidRecords, s.InvalidScheduler)
	for _, table := range []struct {
		head   string
		counts map[string]int
	}{
		{"OUTCOME", s.Outcomes},
		{"REFUSAL REASON", s.RefusalReasons},
		{"STREAM OUTCOME", s.StreamOutcomes},
		{"TIER", s.Tiers},
		{"WINNER FRESHNESS", s.WinnerFreshness},
	} {
		if len(table.counts) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\tRECORDS\n", table.head)
		for _, k := range slices.Sorted(maps.Keys(table.counts)) {
			fmt.Fprintf(w, "%s\t%d\n", dash(k), table.counts[k])
		}
	}
	if len(s.Members) > 0 {
		fmt.Fprintf(w, "\nTIER\tMEMBER\tADMITTED\n")
		for _, tier := range slices.Sorted(maps.Keys(s.Members)) {
			for _, m := range slices.Sorted(maps.Keys(s.Members[tier])) {
				fmt.Fprintf(w, "%s\t%s\t%d\n", tier, m, s.Members[tier][m])
			}
		}
	}
	return w.Flush()
}
