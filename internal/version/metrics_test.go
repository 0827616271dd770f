package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	want := `
# HELP sluice_build_info The build of this sluice program: its release version, source revision and Go version; always 1.
# TYPE sluice_build_info gauge
sluice_build_info{goversion="` + runtime.Version() + `",revision="` + Revision() + `",version="` + Version() + `"} 1
`
	if err := testutil.CollectAndCompare(BuildInfo(), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
