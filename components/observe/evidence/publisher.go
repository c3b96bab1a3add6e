package evidence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
)

// DefaultRefreshPeriod is how often unchanged mock evidence is confirmed,
// and how often nfd evidence is read again. It is well below the policies'
// default maximum evidence age of ten minutes.
const DefaultRefreshPeriod = time.Minute

// LabelGFDTimestamp is the Unix time, in seconds, at which GPU feature
// discovery last confirmed a node's labels; it rewrites it at every pass
// (its default). It is what the observedAt of nfd evidence means.
const LabelGFDTimestamp = "nvidia.com/gfd.timestamp"

// Publisher keeps one NodeSecurityState per pool node, named after it.
// It leaves attested evidence alone: another publisher owns that.
type Publisher struct {
	// Client reads nodes and writes NodeSecurityStates.
	Client client.Client
	// Lab reads guard.xila.us/mock-* labels as mock evidence.
	Lab bool
	// RefreshPeriod is how often unchanged evidence gets a new observedAt;
	// DefaultRefreshPeriod when zero.
	RefreshPeriod time.Duration
	// Clock defaults to the system clock.
	Clock clock.PassiveClock
	// OnPublish, when set, is called after each successful write.
	OnPublish func(node string)
}

var _ reconcile.Reconciler = &Publisher{}

// SetupWithManager registers the publisher for Nodes and the states it
// owns, and in lab mode for the ResourceSlices mock evidence reads.
func (p *Publisher) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("evidence-publisher").
		For(&corev1.Node{}).
		Owns(&v1alpha1.NodeSecurityState{})
	if p.Lab {
		b = b.Watches(&resourcev1.ResourceSlice{}, handler.EnqueueRequestsFromMapFunc(SliceNodes))
	}
	return b.Complete(p)
}

// SliceNodes maps a ResourceSlice to the nodes whose devices it publishes.
func SliceNodes(_ context.Context, o client.Object) []reconcile.Request {
	s, ok := o.(*resourcev1.ResourceSlice)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, n := range devices.Nodes(s) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: n}})
	}
	return out
}

// Incarnation derives the evidence incarnation from the node's UID and boot
// ID, so that it changes when the node is replaced or rebooted.
func Incarnation(node *corev1.Node) string {
	sum := sha256.Sum256([]byte(string(node.UID) + "/" + node.Status.NodeInfo.BootID))
	return hex.EncodeToString(sum[:8])
}

// Reconcile publishes the evidence of one node, or deletes the state of a
// node that left its pool.
func (p *Publisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := p.Client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, p.remove(ctx, req.Name)
		}
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	pool, inPool := node.Labels[guard.LabelTenantPool]
	if !inPool || !node.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, p.remove(ctx, node.Name)
	}
	var sl []resourcev1.ResourceSlice
	if p.Lab && node.Labels[guard.LabelMockDRADriver] != "" {
		var list resourcev1.ResourceSliceList
		if err := p.Client.List(ctx, &list); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing ResourceSlices for the mock evidence of node %s: %w", node.Name, err)
		}
		sl = list.Items
	}
	now := p.now()
	period := p.period()
	want, confirmed := p.spec(node, sl, now)

	nss := &v1alpha1.NodeSecurityState{}
	err := p.Client.Get(ctx, client.ObjectKey{Name: node.Name}, nss)
	switch {
	case apierrors.IsNotFound(err):
		nss = &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
		fill(nss, node, pool, want)
		if err := controllerutil.SetControllerReference(node, nss, p.Client.Scheme()); err != nil {
			return reconcile.Result{}, fmt.Errorf("owning the state of node %s: %w", node.Name, err)
		}
		if err := p.Client.Create(ctx, nss); err != nil {
			return reconcile.Result{}, fmt.Errorf("creating the state of node %s: %w", node.Name, err)
		}
		p.published(node.Name)
		return reconcile.Result{RequeueAfter: period}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading the state of node %s: %w", node.Name, err)
	case nss.Spec.Source == v1alpha1.SourceAttested:
		return reconcile.Result{}, nil
	}
	same := sameFacts(&nss.Spec, &want) && nss.Labels[guard.LabelTenantPool] == pool
	if same && !confirmed {
		// Nothing confirmed the facts since they were first seen: they
		// keep their observedAt and grow stale.
		return reconcile.Result{RequeueAfter: period}, nil
	}
	age := now.Sub(nss.Spec.ObservedAt.Time)
	if same && (want.Source != v1alpha1.SourceMock && nss.Spec.ObservedAt.Equal(&want.ObservedAt) ||
		want.Source == v1alpha1.SourceMock && age >= 0 && age < period) {
		return reconcile.Result{RequeueAfter: min(period, max(period-age, time.Second))}, nil
	}
	base := nss.DeepCopy()
	fill(nss, node, pool, want)
	if err := controllerutil.SetControllerReference(node, nss, p.Client.Scheme()); err != nil {
		return reconcile.Result{}, fmt.Errorf("owning the state of node %s: %w", node.Name, err)
	}
	if err := p.Client.Patch(ctx, nss, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("updating the state of node %s: %w", node.Name, err)
	}
	p.published(node.Name)
	return reconcile.Result{RequeueAfter: period}, nil
}

// spec builds the evidence of node as read now, and says whether its
// source confirmed it: observedAt is then when the source last confirmed
// the facts, never merely when they were read. Mock evidence is confirmed
// by the publisher itself (it is simulated, and refused by the production
// profile). nfd evidence is confirmed by GPU feature discovery's
// timestamp label; without one, nothing confirms it, and its observedAt is
// when its facts were first read, so that a labeller that stops shows up
// as stale evidence. Mock evidence also names the DRA devices of the
// driver the node names, from the ResourceSlices sl.
func (p *Publisher) spec(node *corev1.Node, sl []resourcev1.ResourceSlice, now time.Time) (v1alpha1.NodeSecurityStateSpec, bool) {
	f := FromLabels(node.Labels, p.Lab)
	if f.Source == v1alpha1.SourceMock {
		dra, ok := mockDRADevices(node, sl, len(f.Devices))
		f.Devices = append(f.Devices, dra...)
		f.Complete = f.Complete && ok
	}
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	confirmed := f.Source == v1alpha1.SourceMock
	if f.Source == v1alpha1.SourceNFD {
		if ts, ok := gfdTimestamp(node.Labels[LabelGFDTimestamp], now); ok {
			at, confirmed = metav1.NewTime(ts), true
		}
	}
	if f.TEE != nil && f.TEE.Attestation != nil {
		f.TEE.Attestation.VerifiedAt = at
	}
	return v1alpha1.NodeSecurityStateSpec{
		NodeUID:     node.UID,
		Incarnation: Incarnation(node),
		ObservedAt:  at,
		Source:      f.Source,
		Complete:    f.Complete,
		Devices:     f.Devices,
		TEE:         f.TEE,
	}, confirmed
}

// gfdTimestamp reads GPU feature discovery's timestamp label. A time in
// the future (beyond a minute of clock skew) is no confirmation: the node's
// clock or the label cannot be trusted; a time slightly ahead counts as now.
func gfdTimestamp(v string, now time.Time) (time.Time, bool) {
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil || secs <= 0 {
		return time.Time{}, false
	}
	ts := time.Unix(secs, 0).UTC()
	switch {
	case ts.After(now.Add(time.Minute)):
		return time.Time{}, false
	case ts.After(now):
		return now.UTC().Truncate(time.Second), true
	}
	return ts, true
}

// fill writes the evidence and the pool label into nss.
func fill(nss *v1alpha1.NodeSecurityState, node *corev1.Node, pool string, spec v1alpha1.NodeSecurityStateSpec) {
	if nss.Labels == nil {
		nss.Labels = map[string]string{}
	}
	nss.Labels[guard.LabelTenantPool] = pool
	nss.Spec = spec
}

// sameFacts compares two specs but for their timestamps.
func sameFacts(a, b *v1alpha1.NodeSecurityStateSpec) bool {
	return cmp.Equal(a, b, cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".ObservedAt" || p.Last().String() == ".VerifiedAt"
	}, cmp.Ignore()))
}

// remove deletes the state published for a node, unless it is attested.
func (p *Publisher) remove(ctx context.Context, name string) error {
	nss := &v1alpha1.NodeSecurityState{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: name}, nss); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nss.Spec.Source == v1alpha1.SourceAttested {
		return nil
	}
	if err := p.Client.Delete(ctx, nss, client.Preconditions{UID: &nss.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the state of node %s: %w", name, err)
	}
	return nil
}

func (p *Publisher) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

func (p *Publisher) period() time.Duration {
	if p.RefreshPeriod <= 0 {
		return DefaultRefreshPeriod
	}
	return p.RefreshPeriod
}

func (p *Publisher) published(node string) {
	if p.OnPublish != nil {
		p.OnPublish(node)
	}
}
