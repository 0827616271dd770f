package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tt "github.com/sluice-dev/sluice/internal/transition/transitiontest"
)

// lockedBuffer is stderr written by the server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMCPCommand runs `kubectl-sluice mcp` in-process on a pipe pair and
// talks to it with the SDK's client: stdout carries only the protocol, the
// logs go to stderr, the default namespace is the connection's, and the
// command returns when the client closes stdin.
func TestMCPCommand(t *testing.T) {
	e := newEnv(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	cmd := newCommand(genericiooptions.IOStreams{In: inR, Out: outW, ErrOut: stderr},
		func() (client.WithWatch, string, error) { return e.Client, tt.Namespace, nil })
	cmd.SetArgs([]string{"mcp"})
	done := make(chan error, 1)
	go func() {
		err := cmd.Execute()
		_ = outW.Close()
		done <- err
	}()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).
		Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != "list_tiers" || tools.Tools[1].Name != "member_transition" {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_tiers", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_tiers: %+v, %v", res, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"namespace":"inference"`) || !strings.Contains(string(raw), `"name":"llama"`) {
		t.Fatalf("list_tiers: %s", raw)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "member_transition",
		Arguments: map[string]any{"action": "quiesce", "tier": "inference/llama", "member": "gpu0", "reason": "driver"}})
	if err != nil || res.IsError {
		t.Fatalf("quiesce: %+v, %v", res, err)
	}
	if p := e.TakePatches(); len(p) != 1 || p[0].Body != `{"spec":{"quiesce":{"members":{"gpu0":"driver"}}}}` {
		t.Fatalf("patches %+v", p)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tt.WaitFor(t, done, "the command's return after stdin closed"); err != nil {
		t.Fatalf("mcp returned %v", err)
	}
	if logs := stderr.String(); !strings.Contains(logs, "tool=member_transition") || !strings.Contains(logs, "outcome=changed") {
		t.Fatalf("stderr:\n%s", logs)
	}
}
