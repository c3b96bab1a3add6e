//go:build integration

package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// gate is a Permit plugin that holds each pod's first binding until the
// test lets it go, so that the test can change the world between Filter
// and PreBind.
type gate struct {
	handle fwk.Handle
	mu     sync.Mutex
	seen   map[types.UID]bool
	held   chan held
}

type held struct {
	uid  types.UID
	node string
}

const gateName = "TestGate"

var _ fwk.PermitPlugin = &gate{}

func (g *gate) Name() string { return gateName }

// Permit makes the first attempt of every pod wait.
func (g *gate) Permit(_ context.Context, _ fwk.CycleState, p *corev1.Pod, node string) (*fwk.Status, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[p.UID] {
		return nil, 0
	}
	g.seen[p.UID] = true
	g.held <- held{p.UID, node}
	return fwk.NewStatus(fwk.Wait), time.Minute
}

// release lets the held pod go on to PreBind.
func (g *gate) release(t *testing.T, uid types.UID) {
	t.Helper()
	wp := g.handle.GetWaitingPod(uid)
	if wp == nil {
		t.Fatalf("pod %s is not waiting", uid)
	}
	wp.Allow(gateName)
}

func newGate() (*gate, namedPlugin) {
	g := &gate{seen: map[types.UID]bool{}, held: make(chan held, 16)}
	return g, namedPlugin{gateName, func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		g.handle = h
		return g, nil
	}}
}

// namedPlugin is an extra plugin for startScheduler.
type namedPlugin struct {
	name    string
	factory frameworkruntime.PluginFactory
}

// TestIntegrationFilterPreBindRace changes the chosen node between Filter
// and PreBind. A new incarnation or a replaced node makes PreBind refuse
// the bind (NODE_CHANGED), after which the pod is judged afresh; evidence
// that turned bad makes it refuse for good.
func TestIntegrationFilterPreBindRace(t *testing.T) {
	g, gatePlugin := newGate()
	startScheduler(t, pluginArgs{}, gatePlugin)
	tn := newTenant(t)

	hold := func(t *testing.T, p *corev1.Pod) held {
		t.Helper()
		select {
		case h := <-g.held:
			if h.uid != p.UID {
				t.Fatalf("held pod %s, want %s", h.uid, p.UID)
			}
			return h
		case <-time.After(30 * time.Second):
			t.Fatal("the pod never reached Permit")
		}
		return held{}
	}

	t.Run("incarnation changes", func(t *testing.T) {
		node := newNode(t, tn.id)
		setEvidence(t, node, attested)
		p := newPod(t, pod(tn.namespace).PinnedTo(node.Name))
		h := hold(t, p)
		rebooted := attested
		rebooted.incarnation = "boot-2"
		setEvidence(t, node, rebooted)
		g.release(t, h.uid)
		waitEvent(t, p, "NODE_CHANGED", "changed incarnation after it was judged: boot-1, now boot-2")
		if got := waitBound(t, p); got != node.Name {
			t.Errorf("bound to %s, want %s", got, node.Name)
		}
		// The record is of the evidence the bind was judged on.
		if got, want := record(t, p), guard.BoundEvidence(string(node.UID), "boot-2"); got != want {
			t.Errorf("%s = %q, want %q", guard.AnnotationBoundEvidence, got, want)
		}
	})
	t.Run("evidence turns bad", func(t *testing.T) {
		node := newNode(t, tn.id)
		setEvidence(t, node, attested)
		p := newPod(t, pod(tn.namespace).PinnedTo(node.Name))
		h := hold(t, p)
		sliced := attested
		sliced.sharing = v1alpha1.SharingTimeSlicing
		setEvidence(t, node, sliced)
		g.release(t, h.uid)
		waitRefused(t, p, "TIME_SLICING_FORBIDDEN")
		stayPending(t, p, 2*time.Second)
	})
	t.Run("node replaced", func(t *testing.T) {
		node := newNode(t, tn.id)
		setEvidence(t, node, attested)
		p := newPod(t, pod(tn.namespace).PinnedTo(node.Name))
		h := hold(t, p)
		ctx := context.Background()
		if err := kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		reborn := node.DeepCopy()
		reborn.ResourceVersion, reborn.UID, reborn.Status = "", "", corev1.NodeStatus{}
		reborn = createReadyNode(t, reborn)
		// The re-provisioned node's publisher reports on it afresh.
		fresh := attested
		fresh.incarnation = "boot-2"
		setEvidence(t, reborn, fresh)
		g.release(t, h.uid)
		waitEvent(t, p, "NODE_CHANGED", string(node.UID))
		if got := waitBound(t, p); got != node.Name {
			t.Errorf("bound to %s, want %s", got, node.Name)
		}
		if got, want := record(t, p), guard.BoundEvidence(string(reborn.UID), "boot-2"); got != want {
			t.Errorf("%s = %q, want the re-provisioned node's %q", guard.AnnotationBoundEvidence, got, want)
		}
	})
}

// waitEvent waits for a FailedScheduling event about the pod that carries
// every fragment.
func waitEvent(t *testing.T, p *corev1.Pod, fragments ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		events, err := kube.EventsV1().Events(p.Namespace).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			for _, e := range events.Items {
				if e.Regarding.UID == p.UID && e.Reason == "FailedScheduling" && containsAll(e.Note, fragments) {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no FailedScheduling event for %s/%s with %q", p.Namespace, p.Name, fragments)
}
