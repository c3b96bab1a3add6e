//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/observe/evidence"
	"github.com/xila-guard/xila-guard/components/observe/pooltaint"
)

// createNode creates a node with labels and a boot ID.
func createNode(t *testing.T, name string, labels map[string]string, boot string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n := fixture.MakeNode(name).Obj()
	maps.Copy(n.Labels, labels)
	if err := k8s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	// A controller may write the node in between: retry on conflicts.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.NodeInfo.BootID = boot
		return k8s.Status().Update(ctx, n)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	return n
}

func getState(name string) (*v1alpha1.NodeSecurityState, error) {
	nss := &v1alpha1.NodeSecurityState{}
	return nss, k8s.Get(context.Background(), client.ObjectKey{Name: name}, nss)
}

func TestIntegrationPublisher(t *testing.T) {
	ctx := context.Background()
	startManager(t, func(mgr ctrl.Manager) error {
		return (&evidence.Publisher{Client: mgr.GetClient(), RefreshPeriod: 2 * time.Second}).SetupWithManager(mgr)
	})
	node := createNode(t, "pub-1", map[string]string{guard.LabelTenantPool: "acme",
		evidence.LabelGPUCount: "2", evidence.LabelSharingStrategy: "none"}, "boot-1")
	createNode(t, "pub-free", map[string]string{evidence.LabelGPUCount: "1"}, "boot-1")

	var first *v1alpha1.NodeSecurityState
	eventually(t, 10*time.Second, func() error {
		nss, err := getState("pub-1")
		if err != nil {
			return err
		}
		if nss.Spec.NodeUID != node.UID || len(nss.Spec.Devices) != 2 || nss.Spec.Devices[0].SharingMode != v1alpha1.SharingExclusive {
			return fmt.Errorf("state %+v", nss.Spec)
		}
		first = nss
		return nil
	})
	if _, err := getState("pub-free"); err == nil {
		t.Error("a node outside any pool got a state")
	}

	t.Run("G-EVIDENCE-FRESHNESS observedAt stays without a confirmation from the source", func(t *testing.T) {
		time.Sleep(3 * time.Second) // longer than the refresh period
		nss, err := getState("pub-1")
		if err != nil {
			t.Fatal(err)
		}
		if !nss.Spec.ObservedAt.Equal(&first.Spec.ObservedAt) {
			t.Errorf("observedAt moved from %s to %s with no new confirmation from the labeller", first.Spec.ObservedAt, nss.Spec.ObservedAt)
		}
	})
	t.Run("G-EVIDENCE-FRESHNESS observedAt follows GPU feature discovery's timestamp", func(t *testing.T) {
		confirmed := time.Now().Add(-5 * time.Second).Truncate(time.Second)
		patchNode(t, "pub-1", func(n *corev1.Node) { n.Labels[evidence.LabelGFDTimestamp] = strconv.FormatInt(confirmed.Unix(), 10) })
		eventually(t, 10*time.Second, func() error {
			nss, err := getState("pub-1")
			if err != nil {
				return err
			}
			if !nss.Spec.ObservedAt.Time.Equal(confirmed) {
				return fmt.Errorf("observedAt %s, want the timestamp %s", nss.Spec.ObservedAt, confirmed)
			}
			return nil
		})
	})
	t.Run("label change flips the evidence", func(t *testing.T) {
		patchNode(t, "pub-1", func(n *corev1.Node) { n.Labels[evidence.LabelSharingStrategy] = "time-slicing" })
		eventually(t, 5*time.Second, func() error {
			nss, err := getState("pub-1")
			if err != nil {
				return err
			}
			if nss.Spec.Devices[0].SharingMode != v1alpha1.SharingTimeSlicing {
				return fmt.Errorf("sharing %s", nss.Spec.Devices[0].SharingMode)
			}
			return nil
		})
	})
	t.Run("reboot changes the incarnation", func(t *testing.T) {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "pub-1"}, n); err != nil {
			t.Fatal(err)
		}
		n.Status.NodeInfo.BootID = "boot-2"
		if err := k8s.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error {
			nss, err := getState("pub-1")
			if err != nil {
				return err
			}
			if nss.Spec.Incarnation == first.Spec.Incarnation {
				return errors.New("incarnation unchanged")
			}
			return nil
		})
	})
	t.Run("a deleted state is republished", func(t *testing.T) {
		nss, err := getState("pub-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(ctx, nss); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, func() error {
			got, err := getState("pub-1")
			if err != nil {
				return err
			}
			if got.UID == nss.UID {
				return errors.New("not recreated yet")
			}
			return nil
		})
	})
	t.Run("leaving the pool removes the state", func(t *testing.T) {
		patchNode(t, "pub-1", func(n *corev1.Node) { delete(n.Labels, guard.LabelTenantPool) })
		eventually(t, 5*time.Second, func() error {
			if _, err := getState("pub-1"); client.IgnoreNotFound(err) != nil || err == nil {
				return fmt.Errorf("state still there (%v)", err)
			}
			return nil
		})
	})
}

func patchNode(t *testing.T, name string, change func(*corev1.Node)) {
	t.Helper()
	n := &corev1.Node{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	base := n.DeepCopy()
	change(n)
	if err := k8s.Patch(context.Background(), n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationPoolTaints(t *testing.T) {
	startManager(t, func(mgr ctrl.Manager) error {
		return (&pooltaint.Manager{Client: mgr.GetClient()}).SetupWithManager(mgr)
	})
	createNode(t, "taint-1", map[string]string{guard.LabelTenantPool: "acme"}, "b")
	want := corev1.Taint{Key: guard.TaintTenantPool, Value: "acme", Effect: corev1.TaintEffectNoSchedule}
	hasTaint := func(want corev1.Taint, present bool) func() error {
		return func() error {
			n := &corev1.Node{}
			if err := k8s.Get(context.Background(), client.ObjectKey{Name: "taint-1"}, n); err != nil {
				return err
			}
			found := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
				return t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect
			})
			if found != present {
				return fmt.Errorf("taints %v: want %v present=%v", n.Spec.Taints, want, present)
			}
			return nil
		}
	}
	eventually(t, 5*time.Second, hasTaint(want, true))
	patchNode(t, "taint-1", func(n *corev1.Node) { n.Labels[guard.LabelTenantPool] = "beta" })
	eventually(t, 5*time.Second, hasTaint(corev1.Taint{Key: want.Key, Value: "beta", Effect: want.Effect}, true))
	patchNode(t, "taint-1", func(n *corev1.Node) { delete(n.Labels, guard.LabelTenantPool) })
	eventually(t, 5*time.Second, hasTaint(corev1.Taint{Key: want.Key, Value: "beta", Effect: want.Effect}, false))
}
