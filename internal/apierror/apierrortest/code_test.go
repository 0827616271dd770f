package apierrortest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/sluice-dev/sluice/internal/apierror"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as testing's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// code runs Code on its own goroutine and returns the code, or the failure
// it reported.
func code(body string) (string, string) {
	r := &fatalRecorder{}
	var got string
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = Code(r, []byte(body))
	}()
	<-done
	return got, r.msg
}

// TestCode: the code of what apierror writes is returned; any other body
// fails the test.
func TestCode(t *testing.T) {
	w := httptest.NewRecorder()
	apierror.New(http.StatusNotFound, apierror.TypeInvalidRequest, "model_not_found", "No such model.").Write(w)
	if got, failed := code(w.Body.String()); got != "model_not_found" || failed != "" {
		t.Errorf("Code = %q (failure %q), want model_not_found", got, failed)
	}
	for _, body := range []string{
		``,
		`not json`,
		`{}`,
		`{"error":{"message":"m","type":"t"}}`,
		`{"error":{"message":"m","type":"t","code":"c"},"extra":1}`,
		`{"error":{"message":"m","type":"t","code":"c","param":null}}`,
	} {
		if got, failed := code(body); failed == "" {
			t.Errorf("Code(%q) = %q without failing the test", body, got)
		}
	}
}
