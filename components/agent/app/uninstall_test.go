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
		want      bool
	}{
		{"still there: a restart or an update", "sys/agent", []runtime.Object{ds}, false, false},
		{"gone: uninstalled", "sys/agent", nil, false, true},
		{"being deleted in the foreground", "sys/agent", []runtime.Object{deleting}, false, true},
		{"API unreachable: keep enforcing", "sys/agent", nil, true, false},
		{"no DaemonSet configured: keep enforcing", "", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			if tc.apiDown {
				cs.PrependReactor("get", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("connection refused")
				})
			}
			got, why := uninstalled(context.Background(), cs, tc.daemonSet)
			if got != tc.want {
				t.Errorf("uninstalled = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
