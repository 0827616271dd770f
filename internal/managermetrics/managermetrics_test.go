package managermetrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// testCounter is registered with controller-runtime's registry, so a scrape
// that shows it was served by the metrics handler.
var testCounter = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "sluice_managermetrics_test_total", Help: "Counts nothing; present in every scrape of these tests.",
})

func init() { metrics.Registry.MustRegister(testCounter) }

func TestBindFlagsDefaultsServeHTTPSWithAuthentication(t *testing.T) {
	var f Flags
	f.BindFlags(flag.NewFlagSet("manager", flag.ContinueOnError))
	if f != (Flags{BindAddress: ":8443", Secure: true}) {
		t.Fatalf("defaults = %+v", f)
	}
	opts, err := f.ServerOptions()
	if err != nil {
		t.Fatal(err)
	}
	if !opts.SecureServing || opts.BindAddress != ":8443" || opts.FilterProvider == nil {
		t.Errorf("options = %+v, want HTTPS on :8443 with the authentication filter", opts)
	}
}

func TestServerOptionsRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		flags Flags
		want  string
	}{
		{"empty address", Flags{Secure: true}, "--metrics-bind-address is empty"},
		{"cert dir over HTTP", Flags{BindAddress: ":8080", CertDir: dir}, "--metrics-cert-dir needs --metrics-secure"},
		{"HTTP/2 over HTTP", Flags{BindAddress: ":8080", EnableHTTP2: true}, "--enable-http2 needs --metrics-secure"},
		{"cert dir without files", Flags{BindAddress: ":8443", Secure: true, CertDir: dir}, "--metrics-cert-dir: stat " + dir + "/tls.crt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.flags.ServerOptions()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestZeroAddressDisablesTheServer(t *testing.T) {
	opts, err := Flags{BindAddress: "0", Secure: true}.ServerOptions()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(opts, &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil || srv != nil {
		t.Errorf("NewServer = %v, %v; want no server", srv, err)
	}
}

func TestInsecureServesPlainHTTPWithoutAuthentication(t *testing.T) {
	addr := serve(t, Flags{Secure: false})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("sluice_managermetrics_test_total")) {
		t.Errorf("GET /metrics = %d %q", resp.StatusCode, body)
	}
}

func TestHTTP2IsOffUnlessEnabled(t *testing.T) {
	for _, tc := range []struct {
		enable bool
		want   string
	}{{false, "http/1.1"}, {true, "h2"}} {
		addr := serve(t, Flags{Secure: true, EnableHTTP2: tc.enable})
		state := handshake(t, addr)
		if state.NegotiatedProtocol != tc.want {
			t.Errorf("--enable-http2=%v: client offering h2 negotiated %q, want %q", tc.enable, state.NegotiatedProtocol, tc.want)
		}
	}
}

func TestCertDirServesItsCertificate(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("sluice-manager-metrics.sluice-system.svc", []net.IP{{127, 0, 0, 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{CertName: certPEM, KeyName: keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	want, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	state := handshake(t, serve(t, Flags{Secure: true, CertDir: dir}))
	if got := state.PeerCertificates[0]; !got.Equal(want) {
		t.Errorf("served certificate for %q, want the one in --metrics-cert-dir (%q)", got.Subject, want.Subject)
	}
}

// serve starts the metrics server that f describes on a free loopback port
// and returns its address once it accepts connections. The filter's API
// server is unreachable: these tests never get past the handshake or use
// plain HTTP, which has no filter.
func serve(t *testing.T, f Flags) string {
	t.Helper()
	f.BindAddress = freeAddr(t)
	opts, err := f.ServerOptions()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(opts, &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	var d net.Dialer
	NewWithT(t).Eventually(func() error {
		conn, err := d.DialContext(ctx, "tcp", f.BindAddress)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
	return f.BindAddress
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// handshake connects with TLS offering h2 and http/1.1, as Go's HTTP
// client does, and returns the negotiated state.
func handshake(t *testing.T, addr string) tls.ConnectionState {
	t.Helper()
	d := tls.Dialer{Config: &tls.Config{
		NextProtos:         []string{"h2", "http/1.1"},
		InsecureSkipVerify: true, //nolint:gosec // The test reads the served certificate instead of trusting it.
		MinVersion:         tls.VersionTLS12,
	}}
	conn, err := d.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState()
}
