package router

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/adminserver"
	"github.com/sluice-dev/sluice/internal/tiers"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/admission"
	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/source"
	"github.com/sluice-dev/sluice/internal/tiers/tierstest"
	"github.com/sluice-dev/sluice/internal/upstream"
)

// failSafe bounds every wait of a test on an event; it is a deadline for a
// broken test, never the way a test waits for something.
const failSafe = 20 * time.Second

// upstreamPool tracks the requests in flight across a set of fake members,
// to check the tier ceiling at the members rather than in the router.
type upstreamPool struct {
	active atomic.Int64
	high   atomic.Int64
}

// fakeMember is a fake member: an httptest server counting requests and the
// concurrent high-water mark, and running the behavior the test sets.
type fakeMember struct {
	t        *testing.T
	id       string
	srv      *httptest.Server
	pool     *upstreamPool
	requests atomic.Int64
	active   atomic.Int64
	high     atomic.Int64
	arrived  chan *seenRequest

	mu       sync.Mutex
	behavior func(w http.ResponseWriter, r *http.Request)
	seen     []*seenRequest
}

// seenRequest is what a fake member received.
type seenRequest struct {
	header http.Header
	body   []byte
	path   string
}

func newUpstream(t *testing.T, id string, pool *upstreamPool) *fakeMember {
	t.Helper()
	u := &fakeMember{t: t, id: id, pool: pool, arrived: make(chan *seenRequest, 256)}
	u.behavior = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"ok","member":"`+id+`"}`)
	}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *fakeMember) serve(w http.ResponseWriter, r *http.Request) {
	u.requests.Add(1)
	raise(&u.high, u.active.Add(1))
	defer u.active.Add(-1)
	if u.pool != nil {
		raise(&u.pool.high, u.pool.active.Add(1))
		defer u.pool.active.Add(-1)
	}
	body, _ := io.ReadAll(r.Body)
	seen := &seenRequest{header: r.Header.Clone(), body: body, path: r.URL.Path}
	u.mu.Lock()
	u.seen = append(u.seen, seen)
	behavior := u.behavior
	u.mu.Unlock()
	u.arrived <- seen
	behavior(w, r)
}

// raise sets high to v if v is larger.
func raise(high *atomic.Int64, v int64) {
	for {
		h := high.Load()
		if v <= h || high.CompareAndSwap(h, v) {
			return
		}
	}
}

// handle sets the member's behavior.
func (u *fakeMember) handle(f func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	u.behavior = f
	u.mu.Unlock()
}

// waitArrival waits for the next request to reach the member.
func (u *fakeMember) waitArrival(t *testing.T) *seenRequest {
	t.Helper()
	select {
	case s := <-u.arrived:
		return s
	case <-time.After(failSafe):
		t.Fatalf("no request reached %s", u.id)
	}
	return nil
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fixture is a Router behind an httptest server, with its admin handler,
// fake readiness and pressure, a recorder and a release counter.
type fixture struct {
	t        *testing.T
	rt       *Router
	front    *httptest.Server
	admin    *httptest.Server
	ready    *tierstest.Readiness
	pressure *tierstest.Pressure
	outcomes chan Outcome
	logs     *syncBuffer
	client   *http.Client
	evidence *evidence.Log      // every request's decision record.
	sink     *evidence.FileSink // the records' JSONL file, when fixtureOptions.decisionFile is set.
	sinkPath string

	mu       sync.Mutex
	releases map[string]int // "tier#member" → calls of Lease.Release.
}

type fixtureOptions struct {
	keys         *apikeys.Keys
	adminToken   *apikeys.Keys
	maxBody      int64
	maxBuffered  int64                // Options.MaxBufferedBodyBytes.
	decisionFile string               // a JSONL file sink for the decision log.
	tls          *tls.Config          // Options.TLSConfig.
	hostAddrs    tiers.HostAddrs      // Options.HostAddrs.
	tracer       trace.TracerProvider // Options.TracerProvider.
	clock        clock.PassiveClock   // Options.Clock.
	intervals    IntervalRecorder     // Options.Intervals.
	passHeaders  []string             // Options.PassEngineHeaders.
	authed       func(*http.Request)  // Options.Authenticated.
	// beforeWrite is the member client's upstream.WithBeforeWrite hook.
	beforeWrite func(local net.Addr)
	// onRelease is called after the fixture counted a release
	// (Options.OnRelease).
	onRelease func(tier, member string)
	// admission are Options.AdmissionOptions.
	admission []admission.Option
	// noRechecker leaves Options.Rechecker nil; by default the fake
	// readiness is the Rechecker.
	noRechecker bool
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		ready:    &tierstest.Readiness{},
		pressure: &tierstest.Pressure{},
		outcomes: make(chan Outcome, 256),
		logs:     &syncBuffer{},
		releases: map[string]int{},
	}
	f.evidence, f.sink = newEvidenceLog(t, o.decisionFile)
	f.sinkPath = o.decisionFile
	var recheck tiers.Rechecker = f.ready
	if o.noRechecker {
		recheck = nil
	}
	f.rt = New(Options{
		Readiness:            f.ready,
		Rechecker:            recheck,
		Pressure:             f.pressure,
		Keys:                 o.keys,
		Authenticated:        o.authed,
		MaxBodyBytes:         o.maxBody,
		MaxBufferedBodyBytes: o.maxBuffered,
		TLSConfig:            o.tls,
		HostAddrs:            o.hostAddrs,
		Clock:                o.clock,
		Intervals:            o.intervals,
		TracerProvider:       o.tracer,
		PassEngineHeaders:    o.passHeaders,
		Upstream:             []upstream.Option{upstream.WithBeforeWrite(o.beforeWrite)},
		AdmissionOptions:     o.admission,
		OnRelease: func(tier, member string) {
			f.mu.Lock()
			f.releases[tier+"#"+member]++
			f.mu.Unlock()
			if o.onRelease != nil {
				o.onRelease(tier, member)
			}
		},
		Logger: slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		// The decision log first: once an outcome is on the channel, its
		// record is in the log.
		Recorder: Recorders{EvidenceRecorder(f.evidence), recorderFunc(func(o Outcome) { f.outcomes <- o })},
	})
	f.front = httptest.NewServer(f.rt)
	f.admin = httptest.NewServer(adminserver.New(f.rt.Tiers(), adminserver.Options{Token: o.adminToken}))
	transport := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	f.client = &http.Client{Transport: transport}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		f.front.Close()
		f.admin.Close()
		f.rt.Close()
	})
	return f
}

type recorderFunc func(Outcome)

func (r recorderFunc) Record(o Outcome) { r(o) }

// apply applies tiers as a source snapshot, registering every member ready.
func (f *fixture) apply(list ...source.Tier) tiers.ApplyResult {
	s := source.Snapshot{Tiers: list}
	f.ready.Reconfigure(tiers.ReadinessTiers(s))
	return f.rt.Tiers().Apply(s)
}

// outcome waits for the next recorded outcome: the request has ended and
// its lease, if any, was released.
func (f *fixture) outcome() Outcome {
	f.t.Helper()
	select {
	case o := <-f.outcomes:
		return o
	case <-time.After(failSafe):
		f.t.Fatal("no outcome recorded")
	}
	return Outcome{}
}

// releaseCalls returns how often the router released a lease of the member.
func (f *fixture) releaseCalls(tier, member string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.releases[tier+"#"+member]
}

// totalReleases returns every release call.
func (f *fixture) totalReleases() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.releases {
		n += c
	}
	return n
}

// assertIdle checks that the tier and all its members hold no lease.
func (f *fixture) assertIdle(key string) {
	f.t.Helper()
	ts, _ := f.rt.Tiers().Table().Lookup(key)
	if ts == nil {
		f.t.Fatalf("tier %s unknown", key)
	}
	s := ts.Admission().Snapshot()
	sum := 0
	for _, m := range s.Members {
		sum += m.Active
		if m.Active != 0 {
			f.t.Errorf("member %s active = %d, want 0", m.ID, m.Active)
		}
	}
	if s.Active != 0 || sum != s.Active {
		f.t.Errorf("tier active = %d (members sum %d), want 0", s.Active, sum)
	}
}

// post sends an inference request.
func (f *fixture) post(ctx context.Context, path, body string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.front.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	return f.client.Do(req)
}

// reply is a response read to its end.
type reply struct {
	StatusCode int
	Header     http.Header
}

// mustPost sends a request and reads the whole response.
func (f *fixture) mustPost(path, body string, header http.Header) (reply, []byte) {
	f.t.Helper()
	resp, err := f.post(context.Background(), path, body, header)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("reading the response: %v", err)
	}
	return reply{StatusCode: resp.StatusCode, Header: resp.Header}, data
}

// adminGet reads an admin route.
func (f *fixture) adminGet(path string, header http.Header) (int, []byte) {
	f.t.Helper()
	return f.adminDo(http.MethodGet, path, header)
}

func (f *fixture) adminDo(method, path string, header http.Header) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, f.admin.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// chat is a chat completion body for model.
func chat(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]}`
}

// timeouts sets the tier's upstream timeouts.
func timeouts(header, idle time.Duration) func(*v1alpha1.ReplicaTierSpec) {
	return func(s *v1alpha1.ReplicaTierSpec) {
		s.Upstream = &v1alpha1.UpstreamSpec{
			ResponseHeaderTimeout: &metav1.Duration{Duration: header},
			IdleTimeout:           &metav1.Duration{Duration: idle},
		}
	}
}

// tierMax sets the tier ceiling.
func tierMax(n int32) func(*v1alpha1.ReplicaTierSpec) {
	return func(s *v1alpha1.ReplicaTierSpec) { s.MaxConcurrency = &n }
}
