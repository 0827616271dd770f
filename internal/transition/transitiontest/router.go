package transitiontest

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sluice-dev/sluice/api/v1alpha1"
)

// FakeRouter plays the router on llama's node: once llama's gpu0 is
// quiesced while Admitting, it reports gpu0 Draining for the current
// generation and sends on reportedDraining, then, once release is closed,
// reports gpu0 Drained. The returned function stops it and waits for it.
func (e *Env) FakeRouter(t testing.TB, release <-chan struct{}, reportedDraining chan<- struct{}) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := e.Base.Watch(ctx, &v1alpha1.ReplicaTierList{}, client.InNamespace(Namespace))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				cur, _ := ev.Object.(*v1alpha1.ReplicaTier)
				if cur == nil || cur.Name != "llama" || cur.Spec.Quiesce == nil || cur.Spec.Quiesce.Members["gpu0"] == "" ||
					cur.Status.Members[0].Phase != v1alpha1.MemberAdmitting {
					continue
				}
				e.report(ctx, t, func(cur *v1alpha1.ReplicaTier) {
					cur.Status.Router.AppliedGeneration = cur.Generation
					cur.Status.Members[0].Phase = v1alpha1.MemberDraining
				})
				reportedDraining <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
				e.report(ctx, t, func(cur *v1alpha1.ReplicaTier) { cur.Status.Members[0].Phase = v1alpha1.MemberDrained })
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// report reads llama, changes its status with change and writes the
// status, as the router does.
func (e *Env) report(ctx context.Context, t testing.TB, change func(*v1alpha1.ReplicaTier)) {
	cur := &v1alpha1.ReplicaTier{}
	if err := e.Base.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "llama"}, cur); err != nil {
		t.Error(err)
		return
	}
	change(cur)
	if err := e.Base.Status().Update(ctx, cur); err != nil {
		t.Error(err)
	}
}
