package enginesim

import (
	"errors"
	"flag"
	"io"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestRegisterFlagsParsesEveryField(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	err := fs.Parse([]string{
		"--model=m", "--aliases=chat, llama,", "--flavor=sglang", "--max-num-seqs=9", "--output-tokens=7",
		"--ttft-base=1ms", "--ttft-per-seq=2ms", "--itl-base=3ms", "--itl-per-seq=4ms",
		"--kv-capacity-tokens=500", "--hidden-load=3", "--hidden-load-tokens=11",
		"--embedding-dim=5", "--error-rate=0.25", "--seed=42", "--stall=forever",
		"--stall-at=after-first-chunk", "--malformed-sse", "--truncate-sse",
		"--metrics-delay=6ms", "--metrics-fail", "--metrics-oversize",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Model: "m", Aliases: []string{"chat", "llama"}, Flavor: FlavorSGLang, MaxNumSeqs: 9, OutputTokens: 7,
		TTFTBase: time.Millisecond, TTFTPerSeq: 2 * time.Millisecond,
		ITLBase: 3 * time.Millisecond, ITLPerSeq: 4 * time.Millisecond,
		KVCapacityTokens: 500, HiddenLoad: 3, HiddenLoadTokens: 11, EmbeddingDim: 5,
		ErrorRate: 0.25, Seed: 42, Stall: Stall{Forever: true}, StallAt: StallAfterFirstChunk,
		MalformedSSE: true, TruncateSSE: true, MetricsDelay: 6 * time.Millisecond,
		MetricsFail: true, MetricsOversize: true,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("parsed config\n got %+v\nwant %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestFlagValuesRejectUnknownNames(t *testing.T) {
	var f Flavor
	if err := f.Set("triton"); !errors.Is(err, ErrUnknownFlavor) {
		t.Fatalf("Flavor.Set = %v, want ErrUnknownFlavor", err)
	}
	var p StallPoint
	if err := p.Set("later"); !errors.Is(err, ErrUnknownStallPoint) {
		t.Fatalf("StallPoint.Set = %v, want ErrUnknownStallPoint", err)
	}
	for _, tc := range []struct {
		in      string
		want    Stall
		wantErr bool
	}{
		{in: "forever", want: Stall{Forever: true}},
		{in: "1.5s", want: Stall{Duration: 1500 * time.Millisecond}},
		{in: "0s", want: Stall{}},
		{in: "-1s", wantErr: true},
		{in: "soon", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var s Stall
			err := s.Set(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidStall) {
					t.Fatalf("Set(%q) = %v, want ErrInvalidStall", tc.in, err)
				}
				return
			}
			if err != nil || s != tc.want {
				t.Fatalf("Set(%q) = %+v, %v; want %+v", tc.in, s, err, tc.want)
			}
			if tc.in != "0s" && s.String() != tc.in {
				t.Fatalf("String() = %q, want %q", s.String(), tc.in)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		mutate func(*Config)
	}{
		{"empty model", func(c *Config) { c.Model = "" }},
		{"long model", func(c *Config) { c.Model = string(make([]byte, MaxModelNameLen+1)) }},
		{"alias equals model", func(c *Config) { c.Aliases = []string{c.Model} }},
		{"duplicate alias", func(c *Config) { c.Aliases = []string{"a", "b", "a"} }},
		{"empty alias", func(c *Config) { c.Aliases = []string{""} }},
		{"too many aliases", func(c *Config) { c.Aliases = make([]string, MaxAliases+1) }},
		{"unknown flavor", func(c *Config) { c.Flavor = "triton" }},
		{"zero slots", func(c *Config) { c.MaxNumSeqs = 0 }},
		{"too many slots", func(c *Config) { c.MaxNumSeqs = MaxNumSeqsLimit + 1 }},
		{"zero output", func(c *Config) { c.OutputTokens = 0 }},
		{"too much output", func(c *Config) { c.OutputTokens = MaxOutputTokensLimit + 1 }},
		{"zero kv", func(c *Config) { c.KVCapacityTokens = 0 }},
		{"negative hidden", func(c *Config) { c.HiddenLoad = -1 }},
		{"hidden fills every slot", func(c *Config) { c.HiddenLoad = c.MaxNumSeqs }},
		{"negative hidden tokens", func(c *Config) { c.HiddenLoadTokens = -1 }},
		{"zero embedding dim", func(c *Config) { c.EmbeddingDim = 0 }},
		{"error rate above 1", func(c *Config) { c.ErrorRate = 1.5 }},
		{"error rate NaN", func(c *Config) { c.ErrorRate = math.NaN() }},
		{"negative latency", func(c *Config) { c.ITLBase = -time.Millisecond }},
		{"huge latency", func(c *Config) { c.TTFTPerSeq = MaxSimDuration + 1 }},
		{"huge stall", func(c *Config) { c.Stall.Duration = time.Hour }},
		{"huge metrics delay", func(c *Config) { c.MetricsDelay = time.Hour }},
		{"unknown stall point", func(c *Config) { c.StallAt = "" }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if _, err := NewServer(cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewServer = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
}

func TestLatencyFormula(t *testing.T) {
	c := Config{TTFTBase: 50 * time.Millisecond, TTFTPerSeq: 5 * time.Millisecond,
		ITLBase: 10 * time.Millisecond, ITLPerSeq: time.Millisecond}
	for running, want := range map[int][2]time.Duration{
		0: {50 * time.Millisecond, 10 * time.Millisecond},
		1: {55 * time.Millisecond, 11 * time.Millisecond},
		8: {90 * time.Millisecond, 18 * time.Millisecond},
	} {
		ttft, itl := c.Latency(running)
		if ttft != want[0] || itl != want[1] {
			t.Errorf("Latency(%d) = %v, %v; want %v, %v", running, ttft, itl, want[0], want[1])
		}
	}
}
