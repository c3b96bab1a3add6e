package evidence

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func poolNode(uid, boot string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", UID: types.UID(uid), Labels: map[string]string{
			guard.LabelTenantPool: "acme", LabelGPUCount: "1", LabelSharingStrategy: "none"}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: boot}},
	}
}

// TestPublisher walks one node through creation, refresh, reboot and
// leaving its pool.
func TestPublisher(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	node := poolNode("uid-1", "boot-1")
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(node).Build()
	p := &Publisher{Client: c, RefreshPeriod: time.Minute, Clock: clk}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "gpu-1"}}
	get := func() *v1alpha1.NodeSecurityState {
		t.Helper()
		nss := &v1alpha1.NodeSecurityState{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, nss); err != nil {
			t.Fatal(err)
		}
		return nss
	}
	reconcileOK := func() reconcile.Result {
		t.Helper()
		res, err := p.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := reconcileOK()
	first := get()
	if first.Spec.Source != v1alpha1.SourceNFD || !first.Spec.Complete || first.Labels[guard.LabelTenantPool] != "acme" || first.Spec.NodeUID != "uid-1" {
		t.Fatalf("published %+v", first)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %s, want 1m", res.RequeueAfter)
	}

	t.Run("unchanged evidence is not rewritten, and read again a period later", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(20 * time.Second))
		if res := reconcileOK(); res.RequeueAfter != time.Minute {
			t.Errorf("requeue after %s, want 1m", res.RequeueAfter)
		}
		if got := get(); got.ResourceVersion != first.ResourceVersion {
			t.Error("state rewritten although nothing changed")
		}
	})
	t.Run("without a source timestamp, reading the same labels again confirms nothing", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(10 * time.Minute))
		reconcileOK()
		if got := get(); !got.Spec.ObservedAt.Equal(&first.Spec.ObservedAt) || got.ResourceVersion != first.ResourceVersion {
			t.Errorf("observedAt %s (resourceVersion %s), want it kept at %s: a silent labeller must show up as stale evidence",
				got.Spec.ObservedAt, got.ResourceVersion, first.Spec.ObservedAt)
		}
	})
	setLabel := func(k, v string) {
		t.Helper()
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, n); err != nil {
			t.Fatal(err)
		}
		n.Labels[k] = v
		if err := c.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("observedAt is GPU feature discovery's last confirmation", func(t *testing.T) {
		confirmed := clk.Now().Add(-30 * time.Second).Truncate(time.Second)
		setLabel(LabelGFDTimestamp, strconv.FormatInt(confirmed.Unix(), 10))
		reconcileOK()
		if got := get(); !got.Spec.ObservedAt.Time.Equal(confirmed) || got.Spec.Incarnation != first.Spec.Incarnation {
			t.Errorf("observedAt %s incarnation %s, want the timestamp label's %s and the same incarnation", got.Spec.ObservedAt, got.Spec.Incarnation, confirmed)
		}
		clk.SetTime(clk.Now().Add(20 * time.Minute))
		reconcileOK()
		if got := get(); !got.Spec.ObservedAt.Time.Equal(confirmed) {
			t.Errorf("observedAt %s after a frozen labeller, want it kept at %s", got.Spec.ObservedAt, confirmed)
		}
	})
	t.Run("a timestamp from the future confirms nothing", func(t *testing.T) {
		before := get().Spec.ObservedAt
		setLabel(LabelGFDTimestamp, strconv.FormatInt(clk.Now().Add(time.Hour).Unix(), 10))
		reconcileOK()
		if got := get(); !got.Spec.ObservedAt.Equal(&before) {
			t.Errorf("observedAt %s, want it kept at %s", got.Spec.ObservedAt, before)
		}
	})
	t.Run("reboot changes the incarnation", func(t *testing.T) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, n); err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.BootID = "boot-2"
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		reconcileOK()
		if got := get(); got.Spec.Incarnation == first.Spec.Incarnation {
			t.Error("incarnation unchanged after reboot")
		}
	})
	t.Run("leaving the pool deletes the state", func(t *testing.T) {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, n); err != nil {
			t.Fatal(err)
		}
		delete(n.Labels, guard.LabelTenantPool)
		if err := c.Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		reconcileOK()
		err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, &v1alpha1.NodeSecurityState{})
		if client.IgnoreNotFound(err) != nil || err == nil {
			t.Errorf("state still there: %v", err)
		}
	})
}

func TestIncarnation(t *testing.T) {
	a := Incarnation(poolNode("uid-1", "boot-1"))
	for name, n := range map[string]*corev1.Node{"uid": poolNode("uid-2", "boot-1"), "boot": poolNode("uid-1", "boot-2")} {
		if Incarnation(n) == a {
			t.Errorf("incarnation unchanged with another %s", name)
		}
	}
	if Incarnation(poolNode("uid-1", "boot-1")) != a {
		t.Error("incarnation not stable")
	}
}

// TestMockEvidenceIsRefreshed: the lab's simulated evidence is confirmed by
// the publisher itself, once per period.
func TestMockEvidenceIsRefreshed(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	node := poolNode("uid-1", "boot-1")
	node.Labels[guard.MockLabelPrefix+"sharing-mode"] = "Exclusive"
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(node).Build()
	p := &Publisher{Client: c, Lab: true, RefreshPeriod: time.Minute, Clock: clk}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "gpu-1"}}
	for i := range 3 {
		if _, err := p.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		nss := &v1alpha1.NodeSecurityState{}
		if err := c.Get(ctx, client.ObjectKey{Name: "gpu-1"}, nss); err != nil {
			t.Fatal(err)
		}
		if nss.Spec.Source != v1alpha1.SourceMock || !nss.Spec.ObservedAt.Time.Equal(clk.Now()) {
			t.Errorf("round %d: source %s observedAt %s, want mock at %s", i, nss.Spec.Source, nss.Spec.ObservedAt, clk.Now())
		}
		clk.SetTime(clk.Now().Add(time.Minute))
	}
}
