package status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// Timing of the Reporter.
const (
	// DefaultInterval is how often the Reporter compares the view with what
	// it wrote when Options.Interval is zero: a Drained transition reaches
	// the API within a quarter second plus the rate limit, and comparing a
	// few hundred members four times a second costs nothing.
	DefaultInterval = 250 * time.Millisecond
	// MinWriteInterval is the rate limit: at most one write per tier per
	// second (docs/KUBERNETES.md#4-router-status-internalstatus).
	// Transitions inside the window are coalesced into the next write, which
	// carries the latest report.
	MinWriteInterval = time.Second
	// QueueStatusInterval is the rate limit of a queue's load: a change of
	// status.queue's waiting or oldestWaitSeconds alone writes a tier at
	// most once per ten seconds. While requests wait the oldest wait
	// changes every second, so writing it as it changes would turn status
	// into a metrics pipe through the API server (one write per second per
	// queued tier, and a manager reconcile for each); ten seconds keeps an
	// operator's view useful at a tenth of that. The exact numbers are the
	// router's metrics and capacity view. A change of anything else still
	// writes within MinWriteInterval and carries the queue along.
	QueueStatusInterval = 10 * time.Second
	// MaxBackoff caps the pause after consecutive failed writes: one router
	// per node must not hammer an API server that is down.
	MaxBackoff = 30 * time.Second
	// WriteTimeout bounds one write, so a hung API server delays the other
	// tiers' reports by at most this long.
	WriteTimeout = 10 * time.Second
)

// Writer writes the router-owned status of one tier.
type Writer interface {
	// Write applies report as the router on node sees the tier. An error
	// wrapping ErrTierGone means the tier no longer exists.
	Write(ctx context.Context, node string, report Report) error
}

// Options configures a Reporter.
type Options struct {
	// Writer writes the reports; NewAPIWriter is the API server's.
	// Required.
	Writer Writer
	// Node is the router's node, written as status.router.node. Required.
	Node string
	// View is what is reported; normally a RouterView. Required.
	View View
	// Clock drives the comparison ticker, the rate limit and the backoff.
	// Its zero value (nil) is the real clock.
	Clock clock.WithTicker
	// Interval is the comparison period. Zero or negative means
	// DefaultInterval.
	Interval time.Duration
	// Logger receives write failures and recoveries. Nil discards them.
	Logger *slog.Logger
	// Compared, when set, is called on Run's goroutine after every
	// comparison round with the number of writes it attempted. A caller
	// that steps Clock waits on it to know the round a tick or a Notify
	// triggered is done. Nil means no call.
	Compared func(writes int)
}

// Reporter writes each tier's report when it changes, rate limited per
// tier. Create it with NewReporter and start it with Run; Notify asks for a
// comparison now. It is not safe to Run twice.
type Reporter struct {
	writer   Writer
	node     string
	view     View
	clock    clock.WithTicker
	interval time.Duration
	log      *slog.Logger
	wake     chan struct{} // capacity one: Notify never blocks.

	// State of the Run goroutine.
	tiers        map[string]*tierRecord
	failures     int
	backoffUntil time.Time

	// compared is Options.Compared; nil calls nothing.
	compared func(writes int)
}

// tierRecord is what the Reporter remembers of one tier.
type tierRecord struct {
	written     *Report   // last report written successfully (or found gone).
	lastAttempt time.Time // zero: never attempted.
}

// NewReporter returns a Reporter for opts, or an error wrapping
// ErrInvalidOptions when Writer, View or Node is missing.
func NewReporter(opts Options) (*Reporter, error) {
	if opts.Writer == nil || opts.View == nil || opts.Node == "" {
		return nil, fmt.Errorf("%w: a writer, a view and a node name are required", ErrInvalidOptions)
	}
	r := &Reporter{
		writer:   opts.Writer,
		node:     opts.Node,
		view:     opts.View,
		clock:    opts.Clock,
		interval: opts.Interval,
		log:      opts.Logger,
		compared: opts.Compared,
		wake:     make(chan struct{}, 1),
		tiers:    map[string]*tierRecord{},
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.interval <= 0 {
		r.interval = DefaultInterval
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Notify asks for a comparison now, for example after a snapshot was
// applied. It never blocks; notifications during a comparison coalesce.
func (r *Reporter) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run compares the view with what was written at once, then on every tick
// and every Notify, and writes the tiers whose report changed. It returns
// nil when ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	ticker := r.clock.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		n := r.round(ctx)
		if r.compared != nil {
			r.compared(n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		case <-r.wake:
		}
	}
}

// round writes every changed report whose tier is outside its rate limit
// window (QueueStatusInterval when only its queue's load changed), and
// returns the number of writes attempted. The first failed
// write ends the round and starts a backoff.
func (r *Reporter) round(ctx context.Context) int {
	now := r.clock.Now()
	if now.Before(r.backoffUntil) {
		return 0
	}
	reports := r.view.Reports()
	seen := make(map[string]bool, len(reports))
	writes := 0
	for _, rep := range reports {
		key := rep.Key()
		seen[key] = true
		rec := r.tiers[key]
		if rec == nil {
			rec = &tierRecord{}
			r.tiers[key] = rec
		}
		if rec.written != nil && rec.written.equal(rep) {
			continue
		}
		if !rec.lastAttempt.IsZero() && now.Sub(rec.lastAttempt) < MinWriteInterval {
			continue // coalesced into a later write.
		}
		if rec.written != nil && rec.written.sameButQueueLoad(rep) && now.Sub(rec.lastAttempt) < QueueStatusInterval {
			continue // only the queue's load changed: written later, or with the next other change.
		}
		rec.lastAttempt = now
		writes++
		wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
		err := r.writer.Write(wctx, r.node, rep)
		cancel()
		switch {
		case err == nil || errors.Is(err, ErrTierGone):
			rec.written = &rep
			if r.failures > 0 {
				r.log.Info("tier status written again", "tier", key)
			}
			r.failures = 0
		case ctx.Err() != nil:
			return writes
		default:
			r.failures++
			wait := min(MinWriteInterval<<min(r.failures-1, 8), MaxBackoff)
			r.backoffUntil = now.Add(wait)
			level := slog.LevelDebug
			if r.failures == 1 {
				level = slog.LevelWarn
			}
			r.log.Log(ctx, level, "tier status not written; retrying", "tier", key, "retry_in", wait, "error", err.Error())
			r.forget(seen, reports)
			return writes
		}
	}
	r.forget(seen, reports)
	return writes
}

// forget drops the records of tiers no longer reported, so a tier that
// comes back is written again. Tiers not reached in an interrupted round
// are kept.
func (r *Reporter) forget(seen map[string]bool, reports []Report) {
	if len(seen) < len(reports) {
		return
	}
	for key := range r.tiers {
		if !seen[key] {
			delete(r.tiers, key)
		}
	}
}
