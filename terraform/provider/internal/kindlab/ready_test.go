package kindlab

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func labNode(name, cidr, ip string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

// nodesByList answers the i-th list of nodes with lists[i], and with the
// last one from then on.
func nodesByList(lists ...[]corev1.Node) *fake.Clientset {
	cs := fake.NewClientset()
	calls := 0
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		items := lists[min(calls, len(lists)-1)]
		calls++
		return true, &corev1.NodeList{Items: items}, nil
	})
	return cs
}

func TestWaitNodeNetworks(t *testing.T) {
	pollInterval = time.Millisecond
	t.Cleanup(func() { pollInterval = time.Second })
	names := []string{"lab-control-plane", "lab-worker", "lab-worker2"}
	cp := labNode("lab-control-plane", "10.244.0.0/24", "172.18.0.2")
	w1 := labNode("lab-worker", "10.244.1.0/24", "172.18.0.3")
	w2 := labNode("lab-worker2", "10.244.2.0/24", "172.18.0.4")
	tests := []struct {
		name    string
		lists   [][]corev1.Node
		wantErr []string
	}{
		{
			name:  "every node at once",
			lists: [][]corev1.Node{{w2, cp, w1}},
		},
		{
			// The failure this wait exists for: kind create returned
			// before the last worker registered.
			name:  "a worker registers late",
			lists: [][]corev1.Node{{cp, w1}, {cp, w1}, {cp, w1, labNode("lab-worker2", "", "172.18.0.4")}, {cp, w1, w2}},
		},
		{
			name:    "a worker never registers",
			lists:   [][]corev1.Node{{cp, w1}},
			wantErr: []string{"waiting for 3 nodes to register with a pod CIDR", "node lab-worker2 has not registered"},
		},
		{
			name:    "no pod CIDR",
			lists:   [][]corev1.Node{{cp, labNode("lab-worker", "", "172.18.0.3"), w2}},
			wantErr: []string{"node lab-worker has no spec.podCIDR yet"},
		},
		{
			name:    "no InternalIP",
			lists:   [][]corev1.Node{{cp, w1, labNode("lab-worker2", "10.244.2.0/24", "")}},
			wantErr: []string{"node lab-worker2 has no InternalIP yet"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			got, err := waitNodeNetworks(ctx, nodesByList(tc.lists...), names)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, labNodes) {
				t.Errorf("got %v, want %v", got, labNodes)
			}
		})
	}
}

func TestNotReadyCountsNodes(t *testing.T) {
	ready := func(n corev1.Node) corev1.Node {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		return n
	}
	cs := nodesByList([]corev1.Node{ready(labNode("a", "", "")), ready(labNode("b", "", ""))})
	if got := notReady(context.Background(), cs, 3); got != "2 of 3 nodes registered" {
		t.Errorf("notReady = %q, want the missing node counted", got)
	}
}
