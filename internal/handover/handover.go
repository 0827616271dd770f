package handover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/tiers"
)

// Version names the handover protocol the hello carries
// (docs/ROUTER.md#81-handing-the-ports-over).
const Version = "sluice-handover/1"

// Bounds of the handover protocol.
const (
	// maxHandoverLine bounds one protocol message. The largest is the
	// snapshot: a router serves at most a few hundred tiers of at most
	// admission.MaxMembers members, each entry under 400 bytes, so 4 MiB
	// holds it many times over while a broken peer cannot grow a line
	// without end.
	maxHandoverLine = 4 << 20
	// handoverWriteTimeout bounds one write to the peer. Both routers are
	// on one host and a message is at most maxHandoverLine; a peer that
	// takes longer is stuck, and the handover ends as if it had gone.
	handoverWriteTimeout = 2 * time.Second
)

// The kinds of handover messages.
const (
	// kindHello opens the channel, from the successor, with the version.
	kindHello = "hello"
	// kindSnapshot is the predecessor's leases when it stopped admitting,
	// one count per member holding leases. Sent once, first.
	kindSnapshot = "snapshot"
	// kindChanges are reservation changes since the snapshot, in order.
	kindChanges = "changes"
)

// handoverMessage is one line of the protocol.
type handoverMessage struct {
	Kind    string          `json:"kind"`
	Version string          `json:"version,omitempty"` // kindHello only.
	Counts  []handoverCount `json:"counts,omitempty"`  // kindSnapshot and kindChanges.
}

// handoverCount is a count of leases of one member of one tier: in a
// snapshot the leases held, in changes a delta (+1 reserved, -1 released).
type handoverCount struct {
	Tier   string `json:"tier"`
	Member string `json:"member"`
	Count  int    `json:"count"`
}

// Gate decides whether Serve hands this router's admission
// over to a successor whose hello was valid. Its zero value accepts every
// such successor.
type Gate struct {
	// Hello, when set, is called once the successor's hello was read and
	// found valid, before anything is handed over: the caller stops
	// sending requests to this router's admission there and returns true,
	// or returns false to refuse this successor (another took the
	// admission over first), and Serve then returns
	// ErrRefused having handed nothing over.
	Hello func() bool
}

// Serve hands this router's admission over to its successor on
// conn (docs/ROUTER.md#81-handing-the-ports-over). It reads the
// successor's hello (the caller bounds the wait with conn's read
// deadline, which Serve lifts once the hello is read, and ctx
// ending cuts it short), asks gate.Hello, then, tier by tier (served and
// removed tiers still holding leases), stops admitting and records the
// leases held (admission.Tier.HandOver), sends them as the snapshot, and
// from then on sends every release of those leases as it happens. The
// caller must stop sending new requests to this router's admission in
// gate.Hello (they are forwarded to the successor), and should not apply
// configuration while the handover lasts. Nothing is handed over before a
// valid hello.
//
// It returns nil once ctx ends after the hello (this router stopped: its
// in-flight requests are over), after sending the changes still queued;
// ctx should end only after the front door's server shut down. Before
// the hello it returns ctx.Err() when ctx ends, an error wrapping
// os.ErrDeadlineExceeded when the deadline passed, one wrapping
// ErrSuccessorGone when the peer closed the channel, ErrProtocol
// for a bad hello, and ErrRefused when gate.Hello refused; after
// it, an error wrapping ErrSuccessorGone when the successor closes the
// channel or a write to it fails, the tiers admitting again before it
// returns. It closes conn.
func Serve(ctx context.Context, set *tiers.Set, conn net.Conn, gate Gate) error {
	defer func() { _ = conn.Close() }()
	r := newHandoverReader(conn)
	if err := readHello(ctx, conn, r); err != nil {
		return err
	}
	if gate.Hello != nil && !gate.Hello() {
		return ErrRefused
	}
	signal := make(chan struct{}, 1)
	tab := set.Table()
	type handedTier struct {
		key string
		h   *admission.Handover
	}
	var tiers []handedTier
	cancelAll := func() {
		for _, t := range tiers {
			t.h.Cancel()
		}
	}
	var snapshot []handoverCount
	for _, ts := range slices.Concat(tab.Served(), tab.Retired()) {
		h, counts, err := ts.Admission().HandOver(signal)
		if err != nil {
			cancelAll()
			return fmt.Errorf("%w: tier %s: %w", ErrHandedOverAlready, ts.Key(), err)
		}
		tiers = append(tiers, handedTier{key: ts.Key(), h: h})
		for _, c := range counts {
			if c.Active > 0 {
				snapshot = append(snapshot, handoverCount{Tier: ts.Key(), Member: c.Member, Count: c.Active})
			}
		}
	}
	w := handoverWriter{conn: conn}
	if err := w.write(handoverMessage{Kind: kindSnapshot, Counts: snapshot}); err != nil {
		cancelAll()
		return err
	}
	// The successor sends nothing after its hello: a read returning means
	// it closed the channel (or broke the protocol).
	gone := make(chan error, 1)
	go func() { gone <- r.read(&handoverMessage{}) }()
	send := func() error {
		var changes []handoverCount
		for _, t := range tiers {
			for _, c := range t.h.Take() {
				changes = append(changes, handoverCount{Tier: t.key, Member: c.Member, Count: c.Delta})
			}
		}
		if len(changes) == 0 {
			return nil
		}
		return w.write(handoverMessage{Kind: kindChanges, Counts: changes})
	}
	for {
		select {
		case <-signal:
			if err := send(); err != nil {
				cancelAll()
				return err
			}
		case err := <-gone:
			cancelAll()
			return fmt.Errorf("%w: %w", ErrSuccessorGone, err)
		case <-ctx.Done():
			return send()
		}
	}
}

// AdoptedLeases is what Adopt adopted from the predecessor's
// snapshot.
type AdoptedLeases struct {
	// Adopted is the number of leases adopted.
	Adopted int
	// Ignored is the number of leases of tiers or members this router does
	// not serve; they count against nothing here.
	Ignored int
}

// Adoption observes Adopt. Its zero value observes nothing.
type Adoption struct {
	// Adopted, when set, is called once with what the snapshot adopted,
	// before any change is applied: the caller opens its front door then.
	Adopted func(AdoptedLeases)
	// Changed, when set, is called after each message of changes was
	// applied (logs and tests).
	Changed func()
}

// Adopt takes its predecessor's admission over on conn
// (docs/ROUTER.md#81-handing-the-ports-over): it sends the hello, reads
// the snapshot (the caller bounds the wait with conn's deadline) and
// checks it whole against this router's ceilings before adopting anything
// (adoptedLeases.check): a snapshot that would take a member past its
// ceiling, or a tier past its own, is refused. It then adopts every lease
// of it as a reservation of this router's admission (admission.Tier.Adopt,
// ignoring quiesce: the requests were admitted already) and calls
// o.Adopted with what it adopted; a lease of a tier or member this router
// does not serve is ignored. It then clears conn's deadline and applies
// the predecessor's changes as they come: each release releases one
// adopted lease of that member, and a reservation that would pass a
// ceiling ends the handover. When the channel ends (the predecessor
// stopped or crashed), or ctx ends, every lease still adopted is
// released, and it closes conn.
//
// It returns nil when the predecessor closed the channel after the
// snapshot, ctx.Err() when ctx ended, and an error (wrapping
// ErrProtocol for a malformed message, ErrBounds for
// counts past the ceilings) otherwise; o.Adopted is not called when the
// snapshot did not arrive or was refused.
func Adopt(ctx context.Context, set *tiers.Set, conn net.Conn, o Adoption) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer func() { _ = conn.Close() }()
	w := handoverWriter{conn: conn}
	if err := w.write(handoverMessage{Kind: kindHello, Version: Version}); err != nil {
		return ctxOr(ctx, err)
	}
	r := newHandoverReader(conn)
	var snap handoverMessage
	if err := r.read(&snap); err != nil {
		return ctxOr(ctx, err)
	}
	if snap.Kind != kindSnapshot {
		return fmt.Errorf("%w: the first message is not a snapshot", ErrProtocol)
	}
	_ = conn.SetReadDeadline(time.Time{})
	leases := adoptedLeases{set: set, held: map[adoptedKey][]*admission.Lease{}, tiers: map[string]int{}}
	defer leases.releaseAll()
	if err := leases.check(snap.Counts); err != nil {
		return err
	}
	var summary AdoptedLeases
	for _, c := range snap.Counts {
		n := leases.adopt(c.Tier, c.Member, c.Count)
		summary.Adopted += n
		summary.Ignored += c.Count - n
	}
	if o.Adopted != nil {
		o.Adopted(summary)
	}
	for {
		var m handoverMessage
		if err := r.read(&m); err != nil {
			if errors.Is(err, errHandoverEOF) {
				return nil
			}
			return ctxOr(ctx, err)
		}
		if m.Kind != kindChanges {
			return fmt.Errorf("%w: %q where changes were expected", ErrProtocol, m.Kind)
		}
		for _, c := range m.Counts {
			switch c.Count {
			case -1:
				leases.release(c.Tier, c.Member)
			case 1:
				if err := leases.reserve(c.Tier, c.Member); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%w: change %d", ErrProtocol, c.Count)
			}
		}
		if o.Changed != nil {
			o.Changed()
		}
	}
}

// helloCut is the read deadline that cuts a wait for the hello short: any
// time in the past.
var helloCut = time.Unix(1, 0)

// readHello reads the successor's hello on conn within the read deadline
// the caller set, or until ctx ends, checks it and lifts the deadline.
func readHello(ctx context.Context, conn net.Conn, r handoverReader) error {
	unwatch := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(helloCut) })
	var hello handoverMessage
	err := r.read(&hello)
	if !unwatch() {
		return ctx.Err()
	}
	switch {
	case err != nil:
		return err
	case hello.Kind != kindHello || hello.Version != Version:
		return fmt.Errorf("%w: hello %q %q, want %q", ErrProtocol, hello.Kind, hello.Version, Version)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return nil
}

// ctxOr returns ctx's error when ctx ended (closing conn made err), err
// otherwise.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// adoptedKey names one member of one tier.
type adoptedKey struct{ tier, member string }

// adoptedLeases are the leases Adopt holds for its predecessor. A
// release of a member with no adopted lease left (one that was ignored)
// does nothing.
type adoptedLeases struct {
	set   *tiers.Set
	mu    sync.Mutex
	held  map[adoptedKey][]*admission.Lease
	tiers map[string]int // tier key → leases held of it.
}

// adoptionBound is how many leases a router adopts at most of one member
// it serves, and of the member's tier.
type adoptionBound struct {
	// member is the member's ceiling, else its tier's, else
	// admission.MaxConcurrency: no member of a router holds more.
	member int
	// tier is the tier's ceiling, 0 when the tier is unbounded (its
	// members' bounds then hold).
	tier int
}

// bound returns the adoption bound of member in tier, or false when this
// router does not serve the tier or the member (its leases are ignored).
func (a *adoptedLeases) bound(tier, member string) (adoptionBound, bool) {
	ts, served := a.set.Table().Lookup(tier)
	if !served {
		return adoptionBound{}, false
	}
	s := ts.Admission().Snapshot()
	i := slices.IndexFunc(s.Members, func(m admission.MemberSnapshot) bool { return m.ID == member && !m.Removed })
	if i < 0 {
		return adoptionBound{}, false
	}
	b := adoptionBound{member: s.Members[i].Ceiling, tier: s.Ceiling}
	switch {
	case b.member > 0:
	case b.tier > 0:
		b.member = b.tier
	default:
		b.member = admission.MaxConcurrency
	}
	return b, true
}

// check refuses counts, the predecessor's snapshot, unless adopting them
// all keeps every member this router serves within its adoption bound and
// every tier within its ceiling. A count of a tier or member this router
// does not serve is ignored, but no count may exceed
// admission.MaxConcurrency, more than any router's member holds. It
// adopts and allocates nothing beyond a sum per member.
func (a *adoptedLeases) check(counts []handoverCount) error {
	sums := map[adoptedKey]int{}
	for _, c := range counts {
		switch {
		case c.Count <= 0:
			return fmt.Errorf("%w: snapshot count %d", ErrProtocol, c.Count)
		case c.Count > admission.MaxConcurrency:
			return fmt.Errorf("%w: %d leases of member %q of tier %s in one count, more than any member holds", ErrBounds, c.Count, c.Member, c.Tier)
		}
		k := adoptedKey{c.Tier, c.Member}
		sums[k] += c.Count
		if sums[k] > admission.MaxConcurrency {
			return fmt.Errorf("%w: %d leases of member %q of tier %s, more than any member holds", ErrBounds, sums[k], c.Member, c.Tier)
		}
	}
	type tierSum struct{ held, ceiling int }
	tiers := map[string]tierSum{}
	for k, n := range sums {
		b, served := a.bound(k.tier, k.member)
		if !served {
			continue
		}
		if n > b.member {
			return fmt.Errorf("%w: %d leases of member %q of tier %s, its bound is %d", ErrBounds, n, k.member, k.tier, b.member)
		}
		tiers[k.tier] = tierSum{held: tiers[k.tier].held + n, ceiling: b.tier}
	}
	for tier, s := range tiers {
		if s.ceiling > 0 && s.held > s.ceiling {
			return fmt.Errorf("%w: %d leases of tier %s, its ceiling is %d", ErrBounds, s.held, tier, s.ceiling)
		}
	}
	return nil
}

// adopt adopts n leases of member in tier and returns how many it adopted:
// n, or 0 when this router does not serve the tier or the member. The
// caller checked n against the bounds.
func (a *adoptedLeases) adopt(tier, member string, n int) int {
	ts, served := a.set.Table().Lookup(tier)
	if !served {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := adoptedKey{tier, member}
	for i := range n {
		l, err := ts.Admission().Adopt(member)
		if err != nil {
			return i
		}
		a.held[k] = append(a.held[k], l)
		a.tiers[tier]++
	}
	return n
}

// reserve adopts one more lease of member in tier, the predecessor's
// reservation after its snapshot, unless it would pass the member's
// adoption bound or the tier's ceiling: it then returns an error wrapping
// ErrBounds. A reservation of a tier or member this router does
// not serve is ignored.
func (a *adoptedLeases) reserve(tier, member string) error {
	b, served := a.bound(tier, member)
	if !served {
		return nil
	}
	a.mu.Lock()
	held, tierHeld := len(a.held[adoptedKey{tier, member}]), a.tiers[tier]
	a.mu.Unlock()
	if held >= b.member || (b.tier > 0 && tierHeld >= b.tier) {
		return fmt.Errorf("%w: a reservation past %d leases of member %q of tier %s", ErrBounds, held, member, tier)
	}
	a.adopt(tier, member, 1)
	return nil
}

// release releases one adopted lease of member in tier, if one is held.
func (a *adoptedLeases) release(tier, member string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := adoptedKey{tier, member}
	held := a.held[k]
	if len(held) == 0 {
		return
	}
	held[len(held)-1].Release()
	a.held[k] = held[:len(held)-1]
	a.tiers[tier]--
}

// releaseAll releases every adopted lease still held.
func (a *adoptedLeases) releaseAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, held := range a.held {
		for _, l := range held {
			l.Release()
		}
		delete(a.held, k)
		delete(a.tiers, k.tier)
	}
}

// errHandoverEOF is what handoverReader.read returns when the peer closed
// the channel between two messages.
var errHandoverEOF = fmt.Errorf("%w: channel closed", ErrSuccessorGone)

// handoverReader reads the protocol's JSON lines, each at most
// maxHandoverLine bytes.
type handoverReader struct{ s *bufio.Scanner }

// newHandoverReader returns a reader of conn's lines.
func newHandoverReader(conn net.Conn) handoverReader {
	s := bufio.NewScanner(conn)
	s.Buffer(make([]byte, 0, 4096), maxHandoverLine)
	return handoverReader{s: s}
}

// read decodes the next line into m. It returns errHandoverEOF when the
// channel closed cleanly between messages.
func (r handoverReader) read(m *handoverMessage) error {
	if !r.s.Scan() {
		if err := r.s.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return fmt.Errorf("%w: message over %d bytes", ErrProtocol, maxHandoverLine)
			}
			return err
		}
		return errHandoverEOF
	}
	if err := json.Unmarshal(r.s.Bytes(), m); err != nil {
		return fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return nil
}

// handoverWriter writes the protocol's JSON lines, each within
// handoverWriteTimeout.
type handoverWriter struct{ conn net.Conn }

// write sends m as one line.
func (w handoverWriter) write(m handoverMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(handoverWriteTimeout))
	if _, err := w.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %w", ErrSuccessorGone, err)
	}
	return nil
}
