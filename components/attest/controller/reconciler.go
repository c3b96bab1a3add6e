package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/attest/attester"
	"github.com/xila-guard/xila-guard/components/attest/nonce"
	"github.com/xila-guard/xila-guard/components/attest/verify"
	"github.com/xila-guard/xila-guard/components/core/devices"
)

// Defaults of the Reconciler's timing.
const (
	// DefaultInterval is how often a node is challenged again. Attested
	// evidence is judged by its observedAt against a policy's
	// evidence.maxAge (10 minutes by default) as well as by its verdict's
	// time against maxAttestationAge (an hour by default), so it is
	// refreshed well within the shorter of the two.
	DefaultInterval = time.Minute
	// DefaultRetryInterval is how soon a node whose attester did not
	// answer is challenged again.
	DefaultRetryInterval = 15 * time.Second
	// DefaultFetchTimeout bounds one request to an attester.
	DefaultFetchTimeout = 5 * time.Second
	// DefaultVerifierName is what the verdicts name as their verifier.
	DefaultVerifierName = "xila-guard-attest"
)

// Errors of Challenge, for callers to tell apart.
var (
	// ErrNodeNotFound: there is no such node.
	ErrNodeNotFound = errors.New("no such node")
	// ErrNoAttester: no ready attester runs on the node.
	ErrNoAttester = errors.New("no ready attester runs on the node")
	// ErrAttesterUnreachable: the attester did not answer with evidence.
	ErrAttesterUnreachable = errors.New("the attester did not answer")
)

// Fetcher asks an attester for evidence; *attester.Client is one.
type Fetcher interface {
	Evidence(ctx context.Context, baseURL string, req *attester.Request) (*attester.Evidence, error)
}

// Verifier appraises evidence; *verify.Verifier is one.
type Verifier interface {
	Verify(req verify.Request) (*verify.Result, error)
}

// Reconciler attests the nodes that run an attester. Its zero durations
// take the defaults above.
type Reconciler struct {
	// Client reads nodes, attester pods and NodeSecurityStates and writes
	// the states.
	Client client.Client
	// Reader reads a node's state right before a challenge writes it, so
	// that the write rests on the latest version (the manager's API
	// reader, past the cache); Client when nil.
	Reader client.Reader
	// Attesters says where the attesters are.
	Attesters Attesters
	// Fetcher asks them for evidence.
	Fetcher Fetcher
	// Verifier appraises the evidence.
	Verifier Verifier
	// Profile is the verification profile: production or lab.
	Profile guard.Profile
	// References are the reference values.
	References ReferenceSource
	// VerifierName is the verdicts' verifier; DefaultVerifierName when
	// empty.
	VerifierName string
	// Interval is how often a node is challenged again.
	Interval time.Duration
	// RetryInterval is how soon an unanswered challenge is tried again.
	RetryInterval time.Duration
	// FetchTimeout bounds one request to an attester.
	FetchTimeout time.Duration
	// Recorder receives an Event on the NodeSecurityState for every failed
	// attestation, and for every pass after none or a failure; optional.
	Recorder events.EventRecorder
	// Metrics are updated when set.
	Metrics *Metrics
	// Clock defaults to the system clock.
	Clock clock.PassiveClock

	locks nodeLocks
}

var _ reconcile.Reconciler = &Reconciler{}

// SetupWithManager registers the controller for Nodes, the attester pods
// on them and the NodeSecurityStates it owns, and indexes pods by node.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, workers int) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, IndexNodeName, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("indexing pods by node: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).Named("attestation").
		For(&corev1.Node{}).
		Owns(&v1alpha1.NodeSecurityState{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			pod, ok := o.(*corev1.Pod)
			if !ok || pod.Spec.NodeName == "" || !r.Attesters.matches(pod) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pod.Spec.NodeName}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(workers, 1)}).
		Complete(r)
}

// Reconcile challenges one node when its evidence is due.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	node, pod, nss, err := r.read(ctx, req.Name)
	switch {
	case errors.Is(err, ErrNodeNotFound):
		r.Metrics.forget(req.Name)
		return reconcile.Result{}, nil
	case errors.Is(err, ErrNoAttester):
		// Evidence already written stays, to grow stale; a new attester
		// pod wakes the node up.
		r.track(req.Name, nss, "")
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	}
	inc := Incarnation(node, pod)
	r.track(node.Name, nss, node.UID)
	why, wait := due(nss, node.UID, inc, r.now(), r.interval())
	if why == "" {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	log.V(1).Info("challenging", "node", node.Name, "why", why)
	if _, err := r.attest(ctx, node, pod); err != nil {
		if errors.Is(err, ErrAttesterUnreachable) {
			log.Info("attester did not answer; the evidence is not refreshed", "node", node.Name, "err", err.Error())
		} else {
			log.Error(err, "attesting failed; the evidence is not refreshed", "node", node.Name)
		}
		return reconcile.Result{RequeueAfter: r.retryInterval()}, nil
	}
	return reconcile.Result{RequeueAfter: r.interval()}, nil
}

// Challenge challenges node now, whether or not its evidence is due, and
// returns the NodeSecurityState written. Its errors wrap ErrNodeNotFound,
// ErrNoAttester, ErrAttesterUnreachable or ctx's error when they apply.
func (r *Reconciler) Challenge(ctx context.Context, name string) (*v1alpha1.NodeSecurityState, error) {
	node, pod, _, err := r.read(ctx, name)
	if err != nil {
		return nil, err
	}
	return r.attest(ctx, node, pod)
}

// read returns the node, its attester and its state (nil when it has
// none).
func (r *Reconciler) read(ctx context.Context, name string) (*corev1.Node, *corev1.Pod, *v1alpha1.NodeSecurityState, error) {
	nss, err := r.state(ctx, r.Client, name)
	if err != nil {
		return nil, nil, nil, err
	}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nss, fmt.Errorf("node %s: %w", name, ErrNodeNotFound)
		}
		return nil, nil, nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return nil, nil, nss, fmt.Errorf("node %s is being deleted: %w", name, ErrNodeNotFound)
	}
	pod, err := r.Attesters.on(ctx, r.Client, name)
	if err != nil {
		return nil, nil, nil, err
	}
	if pod == nil {
		return node, nil, nss, fmt.Errorf("node %s: %w", name, ErrNoAttester)
	}
	return node, pod, nss, nil
}

func (r *Reconciler) state(ctx context.Context, c client.Reader, name string) (*v1alpha1.NodeSecurityState, error) {
	nss := &v1alpha1.NodeSecurityState{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, nss); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the state of node %s: %w", name, err)
	}
	return nss, nil
}

// due says why the evidence needs a challenge now, or "" and how long it
// stays fresh.
func due(nss *v1alpha1.NodeSecurityState, uid types.UID, incarnation string, now time.Time, interval time.Duration) (string, time.Duration) {
	switch {
	case nss == nil:
		return "the node has no evidence", 0
	case nss.Spec.Source != v1alpha1.SourceAttested:
		return fmt.Sprintf("the evidence is from source %s", nss.Spec.Source), 0
	case nss.Spec.NodeUID != uid:
		return "the node UID changed", 0
	case nss.Spec.Incarnation != incarnation:
		return "the incarnation changed", 0
	}
	age := now.Sub(nss.Spec.ObservedAt.Time)
	if age < 0 || age >= interval {
		return "the evidence is due", 0
	}
	return "", interval - age
}

// attest challenges the node's attester, verifies the answer and writes
// the node's state. An attester that does not answer, reference values
// that cannot be read and a verifier error write nothing.
func (r *Reconciler) attest(ctx context.Context, node *corev1.Node, pod *corev1.Pod) (*v1alpha1.NodeSecurityState, error) {
	unlock, err := r.locks.lock(ctx, node.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	start := time.Now()
	nss, err := r.attestLocked(ctx, node, pod)
	r.Metrics.challenged(time.Since(start))
	return nss, err
}

func (r *Reconciler) attestLocked(ctx context.Context, node *corev1.Node, pod *corev1.Pod) (*v1alpha1.NodeSecurityState, error) {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	old, err := r.state(ctx, reader, node.Name)
	if err != nil {
		r.Metrics.attested(ResultError, "")
		return nil, err
	}
	refs, err := r.References.References()
	if err != nil {
		r.Metrics.attested(ResultError, "")
		return nil, err
	}
	inc := Incarnation(node, pod)
	challenge := nonce.NewChallenge()
	challengedAt := r.now()
	fctx, cancel := context.WithTimeout(ctx, r.fetchTimeout())
	ev, err := r.Fetcher.Evidence(fctx, r.Attesters.url(pod), &attester.Request{NodeUID: string(node.UID), Incarnation: inc, Challenge: challenge})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.Metrics.attested(ResultUnreachable, "")
		return nil, fmt.Errorf("attester %s/%s on node %s: %w: %w", pod.Namespace, pod.Name, node.Name, ErrAttesterUnreachable, err)
	}
	expected := nonce.For(string(node.UID), inc, challenge)
	if len(ev.Devices) > 0 {
		enc, err := attester.EncodeDevices(ev.Devices)
		if err != nil {
			r.Metrics.attested(ResultError, "")
			return nil, fmt.Errorf("encoding the devices of node %s: %w", node.Name, err)
		}
		expected = nonce.ForDevices(string(node.UID), inc, challenge, enc)
	}
	verifyStart := time.Now()
	res, verr := r.Verifier.Verify(verify.Request{
		TEE: ev.TEE, Evidence: ev.Data, Nonce: expected,
		ChallengedAt: challengedAt, Profile: r.Profile, References: refs,
	})
	r.Metrics.verified(time.Since(verifyStart))
	tee, err := judge(ev, res, verr, pinnedChip(old, node.UID))
	if err != nil {
		r.Metrics.attested(ResultError, "")
		return nil, err
	}
	var devs []v1alpha1.GPUDevice
	if tee.Attestation.Verdict == v1alpha1.AttestationPassed && len(ev.Devices) > 0 {
		if devs, err = r.draDevices(ctx, reader, node.Name, ev.Devices); err != nil {
			r.Metrics.attested(ResultError, "")
			return nil, err
		}
	}
	at := metav1.NewTime(r.now().UTC().Truncate(time.Second))
	tee.Attestation.VerifiedAt = at
	tee.Attestation.Verifier = r.verifierName()
	nss, err := r.write(ctx, node, old, v1alpha1.NodeSecurityStateSpec{
		NodeUID: node.UID, Incarnation: inc, ObservedAt: at, Source: v1alpha1.SourceAttested, Complete: true, TEE: tee, Devices: devs,
	})
	if err != nil {
		r.Metrics.attested(ResultError, "")
		return nil, err
	}
	r.Metrics.observed(node.Name, at.Time)
	r.record(nss, node, old)
	return nss, nil
}

// draDevices are the GPUs the node's TEE stated in evidence that verified,
// each named as the DRA device whose ResourceSlice on the node states its
// UUID (the first by driver, pool and name, if several do). A GPU no
// slice states keeps no DRA name: it counts as a GPU of the node, and no
// allocation can be judged by it. The slices are the node's word, read
// from the API server at each attestation; what they say of a device
// beyond its UUID is checked against the evidence at allocation.
func (r *Reconciler) draDevices(ctx context.Context, reader client.Reader, node string, stated []v1alpha1.GPUDevice) ([]v1alpha1.GPUDevice, error) {
	var sl resourcev1.ResourceSliceList
	if err := reader.List(ctx, &sl, client.MatchingFields{resourcev1.ResourceSliceSelectorNodeName: node}); err != nil {
		return nil, fmt.Errorf("listing the ResourceSlices of node %s: %w", node, err)
	}
	byUUID := map[string]devices.Key{}
	for i := range sl.Items {
		s := &sl.Items[i]
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			uuid := devices.FactsOf(s.Spec.Driver, d).UUID
			if uuid == "" || devices.NodeOf(s, d) != node {
				continue
			}
			key := devices.Key{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}
			if prev, ok := byUUID[uuid]; !ok || key.String() < prev.String() {
				byUUID[uuid] = key
			}
		}
	}
	out := make([]v1alpha1.GPUDevice, len(stated))
	for i, d := range stated {
		if k, ok := byUUID[d.ID]; ok {
			d.DRA = &v1alpha1.DRADeviceRef{Driver: k.Driver, Pool: k.Pool, Device: k.Device}
		}
		out[i] = d
	}
	return out, nil
}

// pinnedChip is the chip the node UID's evidence is bound to: the chip ID
// of its attested evidence, when that names the same node UID.
func pinnedChip(nss *v1alpha1.NodeSecurityState, uid types.UID) string {
	if nss == nil || nss.Spec.Source != v1alpha1.SourceAttested || nss.Spec.NodeUID != uid || nss.Spec.TEE == nil {
		return ""
	}
	return nss.Spec.TEE.ChipID
}

// write creates or replaces the node's state, owned by the node and
// labelled with its pool like the evidence publisher's.
func (r *Reconciler) write(ctx context.Context, node *corev1.Node, old *v1alpha1.NodeSecurityState, spec v1alpha1.NodeSecurityStateSpec) (*v1alpha1.NodeSecurityState, error) {
	nss := &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: node.Name}}
	var base *v1alpha1.NodeSecurityState
	if old != nil {
		base, nss = old, old.DeepCopy()
	}
	nss.Spec = spec
	if pool, ok := node.Labels[guard.LabelTenantPool]; ok {
		if nss.Labels == nil {
			nss.Labels = map[string]string{}
		}
		nss.Labels[guard.LabelTenantPool] = pool
	} else {
		delete(nss.Labels, guard.LabelTenantPool)
	}
	// A node re-created under the same name has another UID; the state
	// passes to it.
	refs := nss.OwnerReferences[:0:0]
	for _, ref := range nss.OwnerReferences {
		if ref.Kind != "Node" || ref.UID == node.UID {
			refs = append(refs, ref)
		}
	}
	nss.OwnerReferences = refs
	if err := ctrl.SetControllerReference(node, nss, r.Client.Scheme()); err != nil {
		return nil, fmt.Errorf("owning the state of node %s: %w", node.Name, err)
	}
	if base == nil {
		if err := r.Client.Create(ctx, nss); err != nil {
			return nil, fmt.Errorf("creating the state of node %s: %w", node.Name, err)
		}
		return nss, nil
	}
	if err := r.Client.Patch(ctx, nss, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("updating the state of node %s: %w", node.Name, err)
	}
	return nss, nil
}

// record counts the verdict and reports a failure, or a pass after none
// or a failure, as an Event on the state.
func (r *Reconciler) record(nss *v1alpha1.NodeSecurityState, node *corev1.Node, old *v1alpha1.NodeSecurityState) {
	a := nss.Spec.TEE.Attestation
	if a.Verdict == v1alpha1.AttestationFailed {
		r.Metrics.attested(ResultFailed, a.Reason)
		if r.Recorder != nil {
			r.Recorder.Eventf(nss, node, corev1.EventTypeWarning, string(a.Reason), "Attest", "attestation failed: %s", a.Message)
		}
		return
	}
	r.Metrics.attested(ResultPassed, "")
	passedBefore := old != nil && old.Spec.Source == v1alpha1.SourceAttested && old.Spec.TEE != nil &&
		old.Spec.TEE.Attestation != nil && old.Spec.TEE.Attestation.Verdict == v1alpha1.AttestationPassed
	if r.Recorder != nil && !passedBefore {
		r.Recorder.Eventf(nss, node, corev1.EventTypeNormal, "AttestationPassed", "Attest",
			"attestation passed: %s measurement %s, root of trust %s", nss.Spec.TEE.Type, nss.Spec.TEE.Measurement, a.RootOfTrust)
	}
}

// track keeps the evidence age metric of a node in step with its state.
func (r *Reconciler) track(name string, nss *v1alpha1.NodeSecurityState, uid types.UID) {
	if nss == nil || nss.Spec.Source != v1alpha1.SourceAttested || uid != "" && nss.Spec.NodeUID != uid {
		r.Metrics.forget(name)
		return
	}
	r.Metrics.observed(name, nss.Spec.ObservedAt.Time)
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) interval() time.Duration {
	return orDefault(r.Interval, DefaultInterval)
}

func (r *Reconciler) retryInterval() time.Duration {
	return orDefault(r.RetryInterval, DefaultRetryInterval)
}

func (r *Reconciler) fetchTimeout() time.Duration {
	return orDefault(r.FetchTimeout, DefaultFetchTimeout)
}

func (r *Reconciler) verifierName() string {
	if r.VerifierName == "" {
		return DefaultVerifierName
	}
	return r.VerifierName
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// nodeLocks serialise the challenges of each node, so that a periodic
// challenge and a synchronous one never interleave their writes.
type nodeLocks struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

func (l *nodeLocks) lock(ctx context.Context, name string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]chan struct{}{}
	}
	ch, ok := l.locks[name]
	if !ok {
		ch = make(chan struct{}, 1)
		l.locks[name] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
