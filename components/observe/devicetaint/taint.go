// Package devicetaint takes out of service the Dynamic Resource
// Allocation devices of pool nodes whose evidence fails: one
// DeviceTaintRule per device that the evidence does not name, or that the
// evaluator, judging the node's evidence narrowed to that device, does not
// allow under a policy of the pool's tenants (stale, failing, below a
// minimum). The taint's key is guard.xila.us/device-evidence, its value
// the first reason, its effect NoSchedule or, where the policy asks for
// it, NoExecute. kube-scheduler then allocates the device to no new claim
// (and, with NoExecute, evicts the pods that use it); the webhook still
// judges every allocation, whoever writes it.
package devicetaint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
	"github.com/xila-guard/xila-guard/components/core/wire"
	"github.com/xila-guard/xila-guard/components/observe/compliance"
	"github.com/xila-guard/xila-guard/components/observe/postbind"
)

// Labels of the rules the tainter owns.
const (
	// LabelManagedBy marks the rules as the tainter's; it touches no other.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is its value.
	ManagedBy = "xila-guard-observe"
	// LabelNode names the node whose device a rule taints.
	LabelNode = guard.GroupName + "/node"
)

// DefaultResync is how often a node's devices are judged again when
// nothing they depend on changed, so that evidence going stale is caught.
const DefaultResync = 30 * time.Second

// Tainter reconciles the device taints of one node.
type Tainter struct {
	// Client reads nodes, evidence, ResourceSlices and the guard objects,
	// and writes DeviceTaintRules.
	Client client.Client
	// Evaluator decides; the observe controller's.
	Evaluator postbind.Evaluator
	// Profile is asked of the evaluator.
	Profile guard.Profile
	// Resync judges every node again on this period; DefaultResync when
	// zero.
	Resync time.Duration
}

var _ reconcile.Reconciler = &Tainter{}

// Reconcile brings the taints of one node's devices in step with their
// evidence.
func (t *Tainter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	want := map[string]*resourcev1alpha3.DeviceTaintRule{}
	node := &corev1.Node{}
	err := t.Client.Get(ctx, req.NamespacedName, node)
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading node %s: %w", req.Name, err)
	}
	var evalErr error
	if node != nil && node.Labels[guard.LabelTenantPool] != "" {
		if want, evalErr = t.desired(ctx, node); want == nil {
			return reconcile.Result{}, evalErr
		}
	}
	if err := t.apply(ctx, req.Name, want); err != nil {
		return reconcile.Result{}, err
	}
	if evalErr != nil {
		return reconcile.Result{}, evalErr
	}
	after := t.Resync
	if after <= 0 {
		after = DefaultResync
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// desired returns the rules the devices of a pool node should have. An
// evaluator that cannot answer taints the device (EVALUATOR_ERROR) and
// is returned too; nil rules with an error mean nothing could be read.
func (t *Tainter) desired(ctx context.Context, node *corev1.Node) (map[string]*resourcev1alpha3.DeviceTaintRule, error) {
	var state *v1alpha1.NodeSecurityStateSpec
	nss := &v1alpha1.NodeSecurityState{}
	if err := t.Client.Get(ctx, client.ObjectKey{Name: node.Name}, nss); err == nil {
		state = &nss.Spec
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the evidence of node %s: %w", node.Name, err)
	}
	var sl resourcev1.ResourceSliceList
	if err := t.Client.List(ctx, &sl); err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	subjects, err := compliance.PoolSubjects(ctx, t.Client, node.Labels[guard.LabelTenantPool])
	if err != nil {
		return nil, err
	}
	want := map[string]*resourcev1alpha3.DeviceTaintRule{}
	var evalErr error
	for i := range sl.Items {
		s := &sl.Items[i]
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			if devices.NodeOf(s, d) != node.Name {
				continue
			}
			key := devices.Key{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}
			reason, effect, err := t.judge(ctx, node, state, key, d, subjects)
			if err != nil {
				evalErr = err
			}
			if reason != "" {
				r := Rule(node.Name, key, reason, effect)
				want[r.Name] = r
			}
		}
	}
	return want, evalErr
}

// judge returns why a device must be out of service, and with what
// effect; no reason keeps it in service.
func (t *Tainter) judge(ctx context.Context, node *corev1.Node, state *v1alpha1.NodeSecurityStateSpec, key devices.Key, d *resourcev1.Device,
	subjects map[string][]compliance.Subject) (guard.Reason, resourcev1alpha3.DeviceTaintEffect, error) {
	dev, reason, _ := devices.Evidence(state, key, devices.FactsOf(key.Driver, d))
	if dev == nil {
		return reason, resourcev1alpha3.DeviceTaintEffectNoSchedule, nil
	}
	if len(subjects) == 0 {
		return guard.ReasonNoPolicy, resourcev1alpha3.DeviceTaintEffectNoSchedule, nil
	}
	candidate := wire.Node{Name: node.Name, UID: node.UID, Pool: node.Labels[guard.LabelTenantPool], State: devices.Narrow(state, dev, "")}
	for _, name := range slices.Sorted(maps.Keys(subjects)) {
		for _, s := range subjects[name] {
			res, err := t.Evaluator.Evaluate(ctx, &wire.EvaluateRequest{Profile: t.Profile,
				Pod: wire.Pod{Namespace: s.Namespace}, Tenant: s.Tenant, Policy: s.Policy, Nodes: []wire.Node{candidate}})
			if err != nil {
				return guard.ReasonEvaluatorError, resourcev1alpha3.DeviceTaintEffectNoSchedule,
					fmt.Errorf("evaluating device %s for policy %s: %w", key, s.Policy.Name, err)
			}
			if res.Decision == guard.DecisionAllow {
				continue
			}
			r := guard.ReasonEvaluatorError
			if len(res.Reasons) > 0 {
				r = res.Reasons[0]
			}
			effect := resourcev1alpha3.DeviceTaintEffectNoSchedule
			if dp := s.Policy.Spec.Devices; dp != nil && dp.TaintEffect == v1alpha1.DeviceTaintNoExecute {
				effect = resourcev1alpha3.DeviceTaintEffectNoExecute
			}
			return r, effect, nil
		}
	}
	return "", "", nil
}

// Rule is the DeviceTaintRule that takes one device of a node out of
// service for a reason.
func Rule(node string, key devices.Key, reason guard.Reason, effect resourcev1alpha3.DeviceTaintEffect) *resourcev1alpha3.DeviceTaintRule {
	// The node is part of the name: another node's slice naming the same
	// pool does not share, or block, this node's rule.
	sum := sha256.Sum256([]byte(node + "\x00" + key.String()))
	return &resourcev1alpha3.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "xila-guard-" + hex.EncodeToString(sum[:10]),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNode: node},
		},
		Spec: resourcev1alpha3.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1alpha3.DeviceTaintSelector{Driver: &key.Driver, Pool: &key.Pool, Device: &key.Device},
			Taint:          resourcev1alpha3.DeviceTaint{Key: guard.DeviceTaintKey, Value: string(reason), Effect: effect},
		},
	}
}

// apply creates, changes and deletes the node's rules to match want.
func (t *Tainter) apply(ctx context.Context, node string, want map[string]*resourcev1alpha3.DeviceTaintRule) error {
	var have resourcev1alpha3.DeviceTaintRuleList
	if err := t.Client.List(ctx, &have, client.MatchingLabels{LabelManagedBy: ManagedBy, LabelNode: node}); err != nil {
		return fmt.Errorf("listing the DeviceTaintRules of node %s: %w", node, err)
	}
	for i := range have.Items {
		h := &have.Items[i]
		w, ok := want[h.Name]
		switch {
		case !ok:
			if err := t.Client.Delete(ctx, h); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting DeviceTaintRule %s: %w", h.Name, err)
			}
		case !equality.Semantic.DeepEqual(h.Spec.DeviceSelector, w.Spec.DeviceSelector) ||
			h.Spec.Taint.Key != w.Spec.Taint.Key || h.Spec.Taint.Value != w.Spec.Taint.Value || h.Spec.Taint.Effect != w.Spec.Taint.Effect:
			h.Spec = w.Spec
			if err := t.Client.Update(ctx, h); err != nil {
				return fmt.Errorf("updating DeviceTaintRule %s: %w", h.Name, err)
			}
		}
		delete(want, h.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if err := t.Client.Create(ctx, want[name]); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceTaintRule %s: %w", name, err)
		}
	}
	return nil
}
