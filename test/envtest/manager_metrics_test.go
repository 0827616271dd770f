package envtest

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sluice-dev/sluice/internal/managermetrics"
)

// managerServiceAccount is the manager's identity in config/rbac.
const managerServiceAccount = "system:serviceaccount:sluice-system:sluice-manager"

// installManagerMetricsRBAC creates what the manager's metrics endpoint
// relies on in config/default (as rendered by kustomize): the sluice-system
// Namespace, the manager's ServiceAccount, sluice-manager-metrics-auth with
// its binding, and sluice-metrics-reader. It returns a configuration that
// acts as the manager's service account, by impersonation. It may run more
// than once.
func installManagerMetricsRBAC(ctx context.Context) *rest.Config {
	objs := renderKustomization("default")
	for _, want := range []struct{ kind, name string }{ // The Namespace first: kustomize keeps file order.
		{"Namespace", "sluice-system"},
		{"ServiceAccount", "sluice-manager"},
		{"ClusterRole", "sluice-manager-metrics-auth"},
		{"ClusterRoleBinding", "sluice-manager-metrics-auth"},
		{"ClusterRole", "sluice-metrics-reader"},
	} {
		u := find(objs, want.kind, want.name)
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, u.DeepCopy()))).To(Succeed(), want.kind+" "+want.name)
	}
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: managerServiceAccount,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:sluice-system", "system:authenticated"},
	}
	return sa
}

// startManagerMetrics runs the metrics server that cmd/manager builds from
// its default flags, on a free loopback port, and returns its address. The
// server reviews tokens and access with managerCfg; it stops when the spec
// ends.
func startManagerMetrics(managerCfg *rest.Config) string {
	addr := freeLoopbackAddr()
	opts, err := managermetrics.Flags{BindAddress: addr, Secure: true}.ServerOptions()
	Expect(err).NotTo(HaveOccurred())
	httpClient, err := rest.HTTPClientFor(managerCfg)
	Expect(err).NotTo(HaveOccurred())
	srv, err := metricsserver.NewServer(opts, managerCfg, httpClient)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	DeferCleanup(func() {
		cancel()
		Expect(<-done).To(Succeed())
	})
	return addr
}

// freeLoopbackAddr returns a loopback address with a port nobody listens on.
func freeLoopbackAddr() string {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return addr
}

// scrape GETs /metrics over TLS with token as the bearer token (none when
// empty) and returns the status code and body.
func scrape(ctx context.Context, addr, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // The endpoint's certificate is self-signed, as in a default install.
		MinVersion:         tls.VersionTLS12,
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

var _ = Describe("manager metrics endpoint (config/default)", func() {
	It("serves only service accounts bound to sluice-metrics-reader, reviewing tokens as the manager", func(ctx context.Context) {
		addr := startManagerMetrics(installManagerMetricsRBAC(ctx))
		status := func(token string) func(context.Context) (int, error) {
			return func(ctx context.Context) (int, error) {
				code, _, err := scrape(ctx, addr, token)
				return code, err
			}
		}

		By("refusing a scrape without a token, once the server is up")
		Eventually(ctx, status("")).WithTimeout(10 * time.Second).Should(Equal(http.StatusUnauthorized))
		// controller-runtime's filter answers a token the API server rejects
		// as an authentication error, not as 401.
		Expect(status("not-a-token")(ctx)).To(Equal(http.StatusInternalServerError))

		By("refusing a service account that is not bound to sluice-metrics-reader")
		ns := newNamespace(ctx)
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}})).To(Succeed())
		clientset, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		token := func() string {
			GinkgoHelper()
			tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred(), "TokenRequest")
			return tr.Status.Token
		}
		Expect(status(token())(ctx)).To(Equal(http.StatusForbidden))

		By("serving Prometheus text once the service account is bound to sluice-metrics-reader")
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sluice-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(k8sClient.Delete(ctx, binding)).To(Succeed()) })
		// The endpoint caches a denial for 30s per reviewed identity; a
		// fresh token carries a new credential ID, so it is reviewed anew.
		allowed := token()
		Eventually(ctx, func(ctx context.Context) (string, error) {
			code, body, err := scrape(ctx, addr, allowed)
			if code != http.StatusOK {
				return "", err
			}
			return body, err
		}).WithTimeout(10 * time.Second).Should(ContainSubstring("controller_runtime_reconcile_total"))
	})
})
