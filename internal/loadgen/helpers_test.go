package loadgen

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/utils/clock"

	"github.com/sluice-dev/sluice/internal/enginesim"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testModel is the model every test engine serves.
const testModel = "sim/model"

// engine is an in-process enginesim behind an httptest server.
type engine struct {
	sim *enginesim.Server
	ts  *httptest.Server
}

// baseURL is the engine's OpenAI API root.
func (e *engine) baseURL() string { return e.ts.URL + "/v1" }

// newEngine starts an enginesim handler configured by mutate (applied to a
// zero-latency default config) and closes it when the test ends.
func newEngine(t *testing.T, clk clock.Clock, mutate func(*enginesim.Config)) *engine {
	t.Helper()
	cfg := enginesim.DefaultConfig()
	cfg.Model = testModel
	cfg.OutputTokens = 5
	cfg.TTFTBase, cfg.TTFTPerSeq, cfg.ITLBase, cfg.ITLPerSeq = 0, 0, 0, 0
	if mutate != nil {
		mutate(&cfg)
	}
	opts := []enginesim.Option{}
	if clk != nil {
		opts = append(opts, enginesim.WithClock(clk))
	}
	sim, err := enginesim.NewServer(cfg, opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return newEngineWith(t, sim, sim)
}

// newEngineWith serves h (sim, possibly wrapped) and closes it when the test
// ends.
func newEngineWith(t *testing.T, sim *enginesim.Server, h http.Handler) *engine {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &engine{sim: sim, ts: ts}
}
