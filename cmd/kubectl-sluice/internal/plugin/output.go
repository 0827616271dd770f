package plugin

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/sluice-dev/sluice/internal/transition"
)

// dash stands in for an empty cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// print writes msg (a verb's one-line result, if any) and s as a table, or
// s alone as JSON.
func (c *cli) print(s transition.Status, msg string) error {
	if c.output == outputJSON {
		enc := json.NewEncoder(c.streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if msg != "" {
		if _, err := fmt.Fprintln(c.streams.Out, msg); err != nil {
			return err
		}
		if len(s.Members) == 0 {
			return nil
		}
	}
	w := printers.GetNewTabWriter(c.streams.Out)
	applied := "-"
	if s.AppliedGeneration != nil {
		applied = strconv.FormatInt(*s.AppliedGeneration, 10)
	}
	fmt.Fprintln(w, "TIER\tNODE\tSTRATEGY\tGENERATION\tAPPLIED\tACCEPTED\tPROGRAMMED\tREADY\tQUIESCED")
	fmt.Fprintf(w, "%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Node, s.Strategy, s.Generation,
		applied, s.Accepted, s.Programmed, s.Ready, dash(s.TierQuiesce))
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.streams.Out)
	if s.Queue != nil {
		fmt.Fprintf(c.streams.Out, "QUEUE  %s\n\n", s.Queue)
	}
	w = printers.GetNewTabWriter(c.streams.Out)
	fmt.Fprintln(w, "MEMBER\tREADY\tPHASE\tQUIESCED")
	for _, m := range s.Members {
		ready := "-"
		if m.Ready != nil {
			ready = strconv.FormatBool(*m.Ready)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.ID, ready, dash(m.Phase), dash(m.Quiesce))
	}
	return w.Flush()
}
