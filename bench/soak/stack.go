package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/adminapi"
	"github.com/sluice-dev/sluice/internal/evidence"
	"github.com/sluice-dev/sluice/internal/procstat"
	"github.com/sluice-dev/sluice/internal/router"
	"github.com/sluice-dev/sluice/internal/startlines"
	"github.com/sluice-dev/sluice/internal/supervise"
)

// Stack bounds.
const (
	// applyTimeout bounds the wait for the router to apply a manifest: the
	// directory is reread every 100 ms.
	applyTimeout = 10 * time.Second
	// readyTimeout bounds the wait for every member to be ready: probes run
	// every 2 s, and a restarted engine must pass one.
	readyTimeout = 30 * time.Second
	// adminTimeout bounds one admin call other than a drain.
	adminTimeout = 5 * time.Second
	// drainTimeout is the drain endpoint's timeout: a quiesced scope holds
	// at most stalled requests, which end within the tier's 1 s timeouts.
	drainTimeout = 10 * time.Second
	// maxAdminBody bounds an admin response the soak reads.
	maxAdminBody = 1 << 20
	// routerShutdownTimeout is the router's --shutdown-timeout, below
	// supervise.DefaultStopGrace so that SIGTERM always ends it before a
	// SIGKILL.
	routerShutdownTimeout = 5 * time.Second
	// tiersPollInterval is the router's --tiers-poll-interval: its minimum,
	// so that reconfiguration lands quickly.
	tiersPollInterval = 100 * time.Millisecond
	// restartAttempts bounds the attempts to restart a killed engine on its
	// port (the port is free once the process is reaped).
	restartAttempts = 3
)

// Stack errors.
var (
	// errAdminStatus reports an admin call answered with an unexpected
	// status.
	errAdminStatus = errors.New("soak: unexpected admin status")
)

// engineSettings are the simulated engines' flags: fast, so that the soak
// sends many requests.
type engineSettings struct {
	ttftBase, itlBase time.Duration
	maxNumSeqs        int
}

// stack is the router and the engines the soak runs.
type stack struct {
	binDir, workDir string
	tiersDir        string
	logDir          string
	engineDir       string
	settings        engineSettings

	mu      sync.Mutex
	engines map[string]*supervise.Process // by member id
	addrs   map[string]string
	router  *supervise.Process
	front   string // http://host:port
	admin   string

	hist []configEpoch // written only by the goroutine that applies
	http *http.Client
}

// newStack prepares the work directory.
func newStack(binDir, workDir string, settings engineSettings) (*stack, error) {
	s := &stack{
		binDir: binDir, workDir: workDir, settings: settings,
		tiersDir:  filepath.Join(workDir, "tiers"),
		logDir:    filepath.Join(workDir, "logs"),
		engineDir: filepath.Join(workDir, "engines"),
		engines:   map[string]*supervise.Process{},
		addrs:     map[string]string{},
		http:      &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}},
	}
	for _, d := range []string{s.tiersDir, s.logDir, s.engineDir} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// engineArgs are the flags of member id's engine listening on listen.
func (s *stack) engineArgs(id, listen string) []string {
	return []string{
		"--listen", listen,
		"--model", servedModel,
		"--log-level", "info",
		"--max-num-seqs", strconv.Itoa(s.settings.maxNumSeqs),
		"--ttft-base", s.settings.ttftBase.String(), "--ttft-per-seq", "0",
		"--itl-base", s.settings.itlBase.String(), "--itl-per-seq", "0",
		"--allow-fault-header",
		"--request-log", filepath.Join(s.engineDir, id+".jsonl"),
	}
}

// startEngine starts member id's engine on listen ("127.0.0.1:0" the first
// time, its address after a kill).
func (s *stack) startEngine(ctx context.Context, id, listen string) error {
	var addr string
	p, err := s.start(ctx, "engine-"+id, "enginesim", s.engineArgs(id, listen), startlines.EngineAddr(&addr))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.engines[id], s.addrs[id] = p, addr
	s.mu.Unlock()
	return nil
}

// startRouter starts the router on the manifest directory.
func (s *stack) startRouter(ctx context.Context) error {
	var front, admin string
	p, err := s.start(ctx, "router", "router", []string{
		"--tiers-dir", s.tiersDir,
		"--tiers-poll-interval", tiersPollInterval.String(),
		"--node-name", nodeName,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--shutdown-timeout", routerShutdownTimeout.String(),
		"--decision-log-file", s.decisionLog(),
	}, startlines.RouterAddrs(&front, &admin))
	if err != nil {
		return err
	}
	s.router, s.front, s.admin = p, "http://"+front, "http://"+admin
	return nil
}

// start starts program bin of the bin directory as name, its output
// appended to the log directory's name.log (a restarted engine's too), and
// waits until ready accepts a line of it.
func (s *stack) start(ctx context.Context, name, bin string, args []string, ready func([]byte) bool) (*supervise.Process, error) {
	return supervise.Start(ctx, supervise.Spec{Name: name, Path: filepath.Join(s.binDir, bin), Args: args,
		Log: filepath.Join(s.logDir, name+".log"), Ready: ready})
}

// stop stops the router, then every engine.
func (s *stack) stop() {
	if s.router != nil {
		s.router.Stop()
	}
	s.mu.Lock()
	engines := make([]*supervise.Process, 0, len(s.engines))
	for _, p := range s.engines {
		engines = append(engines, p)
	}
	s.mu.Unlock()
	for _, p := range engines {
		p.Stop()
	}
}

// kill SIGKILLs member id's engine and returns when it is reaped, with the
// time the signal was sent.
func (s *stack) kill(id string) (time.Time, error) {
	s.mu.Lock()
	p := s.engines[id]
	s.mu.Unlock()
	at := time.Now()
	return at, p.Kill()
}

// restart starts member id's engine again on its port.
func (s *stack) restart(ctx context.Context, id string) error {
	s.mu.Lock()
	addr := s.addrs[id]
	s.mu.Unlock()
	var err error
	for range restartAttempts {
		if err = s.startEngine(ctx, id, addr); err == nil {
			return nil
		}
	}
	return err
}

// apply writes c and waits until the router's admin API shows it applied,
// then records the epoch.
func (s *stack) apply(ctx context.Context, c tierConfig) error {
	s.mu.Lock()
	addrs := make(map[string]string, len(s.addrs))
	for k, v := range s.addrs {
		addrs[k] = v
	}
	s.mu.Unlock()
	written := time.Now()
	if err := writeManifest(s.tiersDir, c, addrs); err != nil {
		return err
	}
	err := supervise.Poll(ctx, applyTimeout, "configuration applied", func() (bool, string, error) {
		var v adminapi.TierView
		if err := s.getJSON(ctx, s.admin+"/admin/v1/tiers/"+tierKey, &v); err != nil {
			return false, "", err
		}
		ok, why := applied(v, c)
		return ok, why, nil
	})
	if err != nil {
		return err
	}
	s.hist = append(s.hist, configEpoch{Written: written.UnixNano(), Applied: time.Now().UnixNano(), Config: c.clone()})
	return nil
}

// capacity reads the capacity view.
func (s *stack) capacity(ctx context.Context) (adminapi.CapacityView, error) {
	var v adminapi.CapacityView
	err := s.getJSON(ctx, s.admin+"/admin/v1/capacity", &v)
	return v, err
}

// awaitReady waits until every member of c is ready.
func (s *stack) awaitReady(ctx context.Context, c tierConfig) error {
	return supervise.Poll(ctx, readyTimeout, "members ready", func() (bool, string, error) {
		v, err := s.capacity(ctx)
		if err != nil {
			return false, "", err
		}
		ready := map[string]bool{}
		for _, t := range v.Tiers {
			if t.Tier == tierKey {
				for _, m := range t.Members {
					ready[m.ID] = m.Ready
				}
			}
		}
		for _, id := range c.memberIDs() {
			if !ready[id] {
				return false, "member " + id + " not ready", nil
			}
		}
		return true, "", nil
	})
}

// awaitNoLeases waits, bounded, until the capacity view holds no lease and
// returns what still holds one when the bound passes.
func (s *stack) awaitNoLeases(ctx context.Context, timeout time.Duration) ([]string, error) {
	var left []string
	err := supervise.Poll(ctx, timeout, "no lease held", func() (bool, string, error) {
		v, err := s.capacity(ctx)
		if err != nil {
			return false, "", err
		}
		left = checkLeases(v)
		return len(left) == 0, fmt.Sprint(left), nil
	})
	if errors.Is(err, supervise.ErrTimeout) {
		return left, nil
	}
	return left, err
}

// drain calls the drain endpoint for the tier (member "") or a member and
// returns the status.
func (s *stack) drain(ctx context.Context, member string) (int, error) {
	url := s.admin + "/admin/v1/tiers/" + tierKey + "/drain?timeout=" + drainTimeout.String()
	if member != "" {
		url += "&member=" + member
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout+adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAdminBody))
	return resp.StatusCode, nil
}

// sample reads the router's goroutines (admin /metrics), open fds and RSS
// (/proc).
func (s *stack) sample(ctx context.Context) (resources, error) {
	var r resources
	body, err := s.get(ctx, s.admin+"/metrics")
	if err != nil {
		return r, err
	}
	if r.Goroutines, err = parseGoroutines(body); err != nil {
		return r, err
	}
	if r.FDs, err = processFDs(s.router.Pid()); err != nil {
		return r, err
	}
	mem, err := procstat.Read(s.router.Pid())
	r.RSSKiB = mem.RSSKiB
	return r, err
}

// quietSample samples the router once it is quiet: its idle member
// connections reaped (the member idle timeout and two reaper periods after
// the load stopped) and two samples in a row agreeing on goroutines and
// fds, so that connections the router is still closing are not counted.
// The baseline is taken so, which makes it the router's floor rather than
// whatever its connection pools held when the load stopped.
func (s *stack) quietSample(ctx context.Context) (resources, error) {
	t := time.NewTimer(router.DefaultMemberIdleTimeout + router.DefaultMemberIdleTimeout/4)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return resources{}, context.Cause(ctx)
	case <-t.C:
	}
	var last resources
	err := supervise.Poll(ctx, settleTimeout, "a quiet router", func() (bool, string, error) {
		r, err := s.sample(ctx)
		if err != nil {
			return false, "", err
		}
		same := r.Goroutines == last.Goroutines && r.FDs == last.FDs
		last = r
		return same, fmt.Sprintf("goroutines %d, fds %d", r.Goroutines, r.FDs), nil
	})
	if err != nil && !errors.Is(err, supervise.ErrTimeout) {
		return resources{}, err
	}
	return last, nil
}

// get GETs url and returns the body of a 200.
func (s *stack) get(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %d", errAdminStatus, resp.StatusCode)
	}
	return body, nil
}

// getJSON GETs url and decodes the 200 body into v.
func (s *stack) getJSON(ctx context.Context, url string, v any) error {
	body, err := s.get(ctx, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// routerLog is the router's own log (its standard error).
func (s *stack) routerLog() string { return filepath.Join(s.logDir, "router.log") }

// panicMessage is the message of the router's log line for a handler's
// panic.
const panicMessage = "panic serving a request"

// routerPanics returns the panic values (with their stacks) of the panic
// lines in the router's log at path.
func routerPanics(path string) ([]string, error) {
	f, err := os.Open(path) //nolint:gosec // the soak's own work directory.
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg   string `json:"msg"`
			Panic string `json:"panic"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == panicMessage {
			out = append(out, line.Panic)
		}
	}
	return out, sc.Err()
}

// firstOf returns the first of ss, or "".
func firstOf(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

// decisionLog is the router's decision log file.
func (s *stack) decisionLog() string { return filepath.Join(s.logDir, "decisions.jsonl") }

// decisions is what the router's decision log says of the admitted
// requests, by request id.
type decisions struct {
	// ends is each request's stream outcome.
	ends map[string]string
	// ejected holds the requests whose failure ejected their member: the
	// router's proof that the member's engine is gone.
	ejected map[string]bool
}

func newDecisions() decisions {
	return decisions{ends: map[string]string{}, ejected: map[string]bool{}}
}

// decisions reads the router's decision log file, the previous one
// (rotated) first. Lines that do not parse are skipped.
func (s *stack) decisions() (decisions, error) {
	d := newDecisions()
	for _, path := range []string{s.decisionLog() + ".1", s.decisionLog()} {
		if err := readDecisions(path, d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return decisions{}, err
		}
	}
	return d, nil
}

// readDecisions adds the admitted records of the decision log file at path
// to d.
func readDecisions(path string, d decisions) error {
	f, err := os.Open(path) //nolint:gosec // the soak's own work directory.
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), evidence.MaxLineBytes)
	for sc.Scan() {
		r, err := evidence.ParseRecord(sc.Bytes())
		if err != nil || r.Outcome != evidence.OutcomeAdmitted {
			continue
		}
		d.ends[r.RequestID] = string(r.End)
		if r.Ejection != "" {
			d.ejected[r.RequestID] = true
		}
	}
	return sc.Err()
}

// engineLogs reads every engine's request log.
func (s *stack) engineLogs() (map[string][]engineRecord, error) {
	out := map[string][]engineRecord{}
	s.mu.Lock()
	ids := make([]string, 0, len(s.addrs))
	for id := range s.addrs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		recs, err := readEngineLog(filepath.Join(s.engineDir, id+".jsonl"))
		if err != nil {
			return nil, err
		}
		out[id] = recs
	}
	return out, nil
}

// readEngineLog parses a request log; a last line cut by a kill is skipped.
func readEngineLog(path string) ([]engineRecord, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // the soak's own work directory.
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return parseEngineLog(raw)
}

// parseEngineLog parses request log lines; an unterminated last line is
// skipped, any other invalid line is an error.
func parseEngineLog(raw []byte) ([]engineRecord, error) {
	var out []engineRecord
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r engineRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if !bytes.HasSuffix(raw, []byte("\n")) && bytes.HasSuffix(raw, sc.Bytes()) {
				break
			}
			return nil, fmt.Errorf("%w: request log line %q", errResources, sc.Bytes())
		}
		out = append(out, r)
	}
	return out, sc.Err()
}
