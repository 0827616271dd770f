package envtest

import (
	"context"
	"net/http"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sluice-dev/sluice/internal/controller"
)

// The outage spec stops and restarts an API server, so it runs against a
// control plane of its own (with its own manager) and leaves the suite's
// alone. The API server keeps its certificates in a directory the spec
// owns, so the restarted server presents the same serving certificate and
// existing clients reconnect; etcd keeps running throughout.
var _ = Describe("router through an API server outage", func() {
	It("keeps routing on the last applied configuration and applies a change made after the restart", func(ctx context.Context) {
		apiServer := &envtest.APIServer{CertDir: GinkgoT().TempDir()}
		// A graceful stop waits for open watches (the manager's, the
		// router's); bound that wait so the outage starts promptly.
		apiServer.Configure().Set("shutdown-watch-termination-grace-period", "1s")
		env := &envtest.Environment{
			CRDDirectoryPaths:        []string{filepath.Join("..", "..", "config", "crd", "bases")},
			ErrorIfCRDPathMissing:    true,
			BinaryAssetsDirectory:    assetsDir(),
			ControlPlane:             envtest.ControlPlane{APIServer: apiServer},
			ControlPlaneStopTimeout:  time.Minute,
			ControlPlaneStartTimeout: time.Minute,
		}
		restCfg, err := env.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		c, err := client.New(restCfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
			Scheme:                 scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// The suite's manager runs a controller of the same name.
			Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		})
		Expect(err).NotTo(HaveOccurred())
		mgrCtx, stopMgr := context.WithCancel(context.Background())
		Expect((&controller.ReplicaTierReconciler{
			Client:   mgr.GetClient(),
			Recorder: mgr.GetEventRecorder(controller.FieldManager),
		}).SetupWithManager(mgrCtx, mgr)).To(Succeed())
		mgrDone := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(mgrDone)
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
		DeferCleanup(func() { stopMgr(); <-mgrDone })

		ns, node := "outage", "node-outage"
		Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		gpu0, gpu1 := newTestEngine(), newTestEngine()
		t := capacityTier(ns, "llama", node, "llama-outage", gpu0, gpu1)
		Expect(c.Create(ctx, t)).To(Succeed())
		r := startRouter(restCfg, node)
		alias := t.Spec.Aliases[0]
		servedBy(r, alias, "gpu0", "gpu1")
		Eventually(routerStatus(ctx, c, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=1/1 gpu0=Admitting/true gpu1=Admitting/true"))

		By("stopping the API server")
		stopping := time.Now()
		Expect(env.ControlPlane.APIServer.Stop()).To(Succeed())
		GinkgoWriter.Printf("the API server stopped in %v\n", time.Since(stopping))
		Eventually(r.logs.String).WithTimeout(routerTimeout).Should(ContainSubstring("serving the last applied configuration"))

		By("routing on the last applied configuration meanwhile")
		Consistently(func(g Gomega) {
			g.Expect(r.chat(alias).status).To(Equal(http.StatusOK))
		}).WithTimeout(quietPeriod).WithPolling(routerPoll).Should(Succeed())
		gpu1Before := gpu1.requests()
		servedBy(r, alias, "gpu0", "gpu1")
		Expect(gpu1.requests()).To(BeNumerically(">", gpu1Before))

		By("starting the API server again")
		Expect(env.ControlPlane.APIServer.Start()).To(Succeed())
		Eventually(func() error {
			return mergePatchWith(ctx, c, t, `{"spec":{"quiesce":{"members":{"gpu1":"maintenance"}}}}`)
		}).WithTimeout(routerTimeout).WithPolling(routerPoll).Should(Succeed())

		By("applying the change made after the restart, after a relist")
		Eventually(routerStatus(ctx, c, t)).WithTimeout(routerTimeout).
			Should(Equal("applied=2/2 gpu0=Admitting/true gpu1=Drained/true"))
		Expect(r.logs.String()).To(ContainSubstring("ReplicaTiers relisted after reconnecting"))
		gpu1Before = gpu1.requests()
		for range 8 {
			Expect(r.chat(alias)).To(Equal(reply{status: http.StatusOK, member: "gpu0"}))
		}
		Expect(gpu1.requests()).To(Equal(gpu1Before))
	})
})
