package app

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestUninstalled(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "agent"}}
	deleting := ds.DeepCopy()
	now := metav1.NewTime(time.Now())
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{"foregroundDeletion"}
	for _, tc := range []struct {
		name      string
		daemonSet string
		objs      []runtime.Object
		apiDown   bool
		seen      bool // the watch saw the deletion
		want      bool
	}{
		{"still there: a restart or an update", "sys/agent", []runtime.Object{ds}, false, false, false},
		{"gone: uninstalled", "sys/agent", nil, false, false, true},
		{"being deleted in the foreground", "sys/agent", []runtime.Object{deleting}, false, false, true},
		{"API unreachable: keep enforcing", "sys/agent", nil, true, false, false},
		{"deletion seen by the watch, RBAC already gone", "sys/agent", nil, true, true, true},
		{"no DaemonSet configured: keep enforcing", "", nil, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			if tc.apiDown {
				cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			w := &ownerWatch{}
			w.deleted.Store(tc.seen)
			got, why := uninstalled(context.Background(), cs, tc.daemonSet, w)
			if got != tc.want {
				t.Errorf("uninstalled = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

// TestOwnerWatchSeesDeletion deletes the DaemonSet while the watch runs.
func TestOwnerWatchSeesDeletion(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "agent"}}
	other := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "other"}}
	cs := fake.NewClientset(ds, other)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := watchOwner(ctx, cs, "sys/agent")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if w.deleted.Load() {
		t.Fatal("deletion reported while the DaemonSet exists")
	}
	if err := cs.AppsV1().DaemonSets("sys").Delete(ctx, "agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !w.deleted.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not see the DaemonSet's deletion")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
