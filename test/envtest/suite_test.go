package envtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sluicev1 "github.com/sluice-dev/sluice/api/v1alpha1"
	"github.com/sluice-dev/sluice/internal/controller"
)

var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	scheme     = runtime.NewScheme()
	reconciler *controller.ReplicaTierReconciler
	stopMgr    context.CancelFunc
	mgrDone    chan struct{}
)

func TestEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's default of 1 s is a deadline for a broken spec only on an
	// idle machine: a shared 2-core CI runner answered a status patch later
	// than that. Specs that wait for longer chains set their own timeout.
	SetDefaultEventuallyTimeout(eventuallyTimeout)
	RunSpecs(t, "envtest suite")
}

// eventuallyTimeout bounds every Eventually without a timeout of its own.
const eventuallyTimeout = 20 * time.Second

// assetsDir is where `make envtest-bins` puts kube-apiserver and etcd.
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join("..", "..", "bin", "k8s")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(sluicev1.AddToScheme(scheme)).To(Succeed())

	dir := assetsDir()
	_, err := os.Stat(filepath.Join(dir, "kube-apiserver"))
	Expect(err).NotTo(HaveOccurred(), "control plane binaries missing in %s: run `make envtest-bins`", dir)

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	var ctx context.Context
	ctx, stopMgr = context.WithCancel(context.Background())
	reconciler = &controller.ReplicaTierReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(controller.FieldManager),
	}
	Expect(reconciler.SetupWithManager(ctx, mgr)).To(Succeed())
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
		<-mgrDone
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
