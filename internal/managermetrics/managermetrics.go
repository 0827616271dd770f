// Package managermetrics builds the options of the manager's metrics server
// from its command-line flags. cmd/manager and the tests share it, so the
// endpoint under test is the endpoint that ships: HTTPS on :8443 where every
// scrape is authenticated with a TokenReview and authorized with a
// SubjectAccessReview against the API server.
package managermetrics

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Names of the certificate files read from Flags.CertDir; they are the
// names of a kubernetes.io/tls Secret's keys, so a cert-manager Secret can
// be mounted as the directory.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// Flags are the manager's metrics endpoint flags.
type Flags struct {
	// BindAddress is where the metrics server listens; "0" disables it.
	BindAddress string
	// Secure serves HTTPS with authentication and authorization; false
	// serves plain, unauthenticated HTTP for local runs.
	Secure bool
	// CertDir holds tls.crt and tls.key; empty means a self-signed
	// certificate generated at start.
	CertDir string
	// EnableHTTP2 lets TLS clients negotiate HTTP/2.
	EnableHTTP2 bool
}

// BindFlags registers the flags on fs with the defaults the manager ships
// with.
func (f *Flags) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.BindAddress, "metrics-bind-address", ":8443",
		"address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&f.Secure, "metrics-secure", true,
		"serve metrics over HTTPS to callers authenticated by TokenReview and authorized by SubjectAccessReview "+
			"(get on /metrics); false serves plain HTTP without authentication, for local runs")
	fs.StringVar(&f.CertDir, "metrics-cert-dir", "",
		"directory with "+CertName+" and "+KeyName+" for the metrics endpoint (for example a cert-manager Secret); "+
			"empty means a self-signed certificate")
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", false,
		"allow HTTP/2 on the metrics endpoint, the manager's only HTTPS server (it has no webhook server); "+
			"off by default as mitigation for the HTTP/2 Stream Cancellation and Rapid Reset vulnerabilities")
}

// ServerOptions validates the flags and returns the metrics server options.
// A certificate directory or HTTP/2 without HTTPS is rejected rather than
// ignored, and so is a certificate directory missing either file, which
// controller-runtime would otherwise replace silently with a self-signed
// certificate.
func (f Flags) ServerOptions() (metricsserver.Options, error) {
	switch {
	case f.BindAddress == "":
		return metricsserver.Options{}, errors.New("--metrics-bind-address is empty; use 0 to disable the metrics endpoint")
	case f.BindAddress == "0":
		return metricsserver.Options{BindAddress: "0"}, nil
	case !f.Secure && f.CertDir != "":
		return metricsserver.Options{}, errors.New("--metrics-cert-dir needs --metrics-secure: plain HTTP uses no certificate")
	case !f.Secure && f.EnableHTTP2:
		return metricsserver.Options{}, errors.New("--enable-http2 needs --metrics-secure: HTTP/2 is negotiated over TLS only")
	case !f.Secure:
		return metricsserver.Options{BindAddress: f.BindAddress}, nil
	}
	if f.CertDir != "" {
		if err := checkCertDir(f.CertDir); err != nil {
			return metricsserver.Options{}, err
		}
	}
	opts := metricsserver.Options{
		BindAddress:    f.BindAddress,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        f.CertDir,
		CertName:       CertName,
		KeyName:        KeyName,
	}
	if !f.EnableHTTP2 {
		opts.TLSOpts = []func(*tls.Config){disableHTTP2}
	}
	return opts, nil
}

// disableHTTP2 offers only HTTP/1.1 in ALPN, so TLS clients cannot
// negotiate HTTP/2.
func disableHTTP2(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}

// checkCertDir fails unless dir holds both certificate files.
func checkCertDir(dir string) error {
	for _, name := range []string{CertName, KeyName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}
