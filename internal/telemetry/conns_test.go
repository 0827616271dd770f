package telemetry

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestConnectionCollector(t *testing.T) {
	c := NewConnectionCollector(func() ConnectionCounts {
		return ConnectionCounts{Open: 12, Unauthenticated: 3, ClosedOverLimit: 4, ClosedEvicted: 5}
	})
	want := `
# HELP sluice_front_door_connections Front door connections open now (--max-connections bounds them).
# TYPE sluice_front_door_connections gauge
sluice_front_door_connections 12
# HELP sluice_front_door_connections_closed_total Front door connections the router closed to stay within its connection limits: connection_limit (a new connection, every slot authenticated), unauthenticated_evicted (the oldest unauthenticated connection, to make room).
# TYPE sluice_front_door_connections_closed_total counter
sluice_front_door_connections_closed_total{reason="connection_limit"} 4
sluice_front_door_connections_closed_total{reason="unauthenticated_evicted"} 5
# HELP sluice_front_door_unauthenticated_connections Front door connections that have not carried an authenticated request yet (--max-unauthenticated-connections bounds them).
# TYPE sluice_front_door_unauthenticated_connections gauge
sluice_front_door_unauthenticated_connections 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
