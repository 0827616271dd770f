package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fixedBodies struct{ held, limit int64 }

func (b fixedBodies) BufferedBodyBytes() (held, limit int64) { return b.held, b.limit }

func TestBodyBufferCollector(t *testing.T) {
	c := NewBodyBufferCollector(fixedBodies{held: 4096, limit: 64 << 20})
	want := `
# HELP sluice_request_body_buffer_limit_bytes The budget of request body buffer bytes (--max-buffered-body-bytes).
# TYPE sluice_request_body_buffer_limit_bytes gauge
sluice_request_body_buffer_limit_bytes 6.7108864e+07
# HELP sluice_request_body_buffered_bytes Bytes of request body buffers the router holds now; a request whose body does not fit under the limit is refused with 503 body_buffer_exhausted.
# TYPE sluice_request_body_buffered_bytes gauge
sluice_request_body_buffered_bytes 4096
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
