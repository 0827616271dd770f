package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tt "github.com/sluice-dev/sluice/internal/transition/transitiontest"
)

// update rewrites the golden files instead of comparing with them, as in
// `go test ./cmd/kubectl-sluice/internal/mcpserver/ -run TestCatalog -update`.
var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// syncBuffer is a log sink safe for the server's goroutines.
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

// connect serves c (default namespace inference) over an in-memory
// transport and returns a connected client session and the server's log;
// both ends stop when the test ends.
func connect(t *testing.T, c client.WithWatch) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	srv := New(Options{Client: c, Namespace: tt.Namespace, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs, logs
}

// TestCatalog pins tools/list: names, descriptions, annotations, input and
// output schemas, in order. An intended change is recorded with -update.
func TestCatalog(t *testing.T) {
	cs, _ := connect(t, tt.New(t).Client)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const path = "testdata/tools.golden.json"
	if *update {
		if err := os.WriteFile(path, got, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("tools/list differs from %s (run with -update if the change is intended):\n%s", path, got)
	}
}

// TestCatalogIsClosedAndDescribed proves every input schema is closed and
// every input property described, whatever the golden file says.
func TestCatalogIsClosedAndDescribed(t *testing.T) {
	for _, tool := range []*mcp.Tool{listTiersTool(), transitionTool()} {
		var s struct {
			AdditionalProperties *bool `json:"additionalProperties"`
			Properties           map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		if s.AdditionalProperties == nil || *s.AdditionalProperties {
			t.Errorf("%s: input schema is not closed: %s", tool.Name, raw)
		}
		if len(s.Properties) == 0 {
			t.Errorf("%s: no properties", tool.Name)
		}
		for name, p := range s.Properties {
			if p.Description == "" {
				t.Errorf("%s: property %s has no description", tool.Name, name)
			}
		}
		if tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("%s: no output schema or description", tool.Name)
		}
	}
}
