package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/evaluate"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

const (
	pool     = "guard.xila.us/tenant-pool"
	tenantNS = "acme-ml"
	strictNS = "acme-strict"
	// pinnedNS's policy allows the images of digests imageDigest only.
	pinnedNS    = "acme-pinned"
	imageDigest = "sha256:1b8a7c0f3e6d2a9b4c5f8e1d7a3b6c9f0e2d5a8b1c4f7e0d3a6b9c2f5e8d1a4b"
	// unlabelledNS is listed by acme's binding but lacks the tenant
	// label; its pod p is privileged.
	unlabelledNS    = "acme-unlabelled"
	plainNS         = "web"
	poolNode        = "gpu-1"
	plainNode       = "cpu-1"
	scheduler       = "system:serviceaccount:xila-guard-system:xila-guard-scheduler"
	volcano         = "system:serviceaccount:volcano-system:volcano-scheduler"
	reporter        = "system:serviceaccount:kai-system:kai-scheduler"
	sharedGPU       = "gpu-shared"
	betaNode        = "gpu-beta"
	infraSA         = "system:serviceaccount:gpu-operator:device-plugin"
	replicaNode     = "gpu-replica"
	passthroughNode = "gpu-passthrough"
)

// fakeCluster is a cluster with one tenant namespace and one pool node.
type fakeCluster struct {
	synced     bool
	identities map[string]Identity
	nodes      map[string]*corev1.Node
	podsOn     map[string][]string
	states     map[string]*v1alpha1.NodeSecurityStateSpec
	pods       map[string]*corev1.Pod
	err        error
}

// acmePolicy accepts attested evidence and forbids time-slicing.
var acmePolicy = v1alpha1.PlacementPolicySpec{Confinement: v1alpha1.ConfinementPool,
	Evidence:   v1alpha1.EvidencePolicy{AcceptedSources: []v1alpha1.EvidenceSource{v1alpha1.SourceAttested}},
	GPUSharing: &v1alpha1.GPUSharingPolicy{ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}}}

// attested is fresh attested evidence of one GPU shared as mode.
func attested(node string, mode v1alpha1.GPUSharingMode) *v1alpha1.NodeSecurityStateSpec {
	return &v1alpha1.NodeSecurityStateSpec{NodeUID: types.UID("uid-" + node), Incarnation: "i1", ObservedAt: metav1.Now(),
		Source: v1alpha1.SourceAttested, Complete: true,
		Devices: []v1alpha1.GPUDevice{{ID: "0", Vendor: "nvidia", Model: "H100", SharingMode: mode}}}
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		synced: true,
		identities: map[string]Identity{
			tenantNS:     {Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"}, Policy: &wire.Policy{Name: "acme-policy", Spec: acmePolicy}},
			unlabelledNS: {Protected: true, Tenant: &wire.Tenant{ID: "acme"}, Policy: &wire.Policy{Name: "acme-policy", Spec: acmePolicy}},
			strictNS: {Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"},
				Policy: &wire.Policy{Name: "acme-strict", Spec: v1alpha1.PlacementPolicySpec{PodSecurity: v1alpha1.PodSecurityRestricted}}},
			pinnedNS: {Protected: true, Labelled: true, Tenant: &wire.Tenant{ID: "acme"},
				Policy: &wire.Policy{Name: "acme-pinned", Spec: v1alpha1.PlacementPolicySpec{
					ConfidentialComputing: &v1alpha1.ConfidentialComputingPolicy{AllowedImageDigests: []string{imageDigest}}}}},
			"orphaned": {Protected: true, Note: "namespace orphaned has an empty guard.xila.us/tenant label"},
		},
		nodes: map[string]*corev1.Node{
			poolNode:  {ObjectMeta: metav1.ObjectMeta{Name: poolNode, UID: "uid-" + poolNode, Labels: map[string]string{pool: "acme"}}},
			sharedGPU: {ObjectMeta: metav1.ObjectMeta{Name: sharedGPU, UID: "uid-" + sharedGPU, Labels: map[string]string{pool: "acme"}}},
			betaNode:  {ObjectMeta: metav1.ObjectMeta{Name: betaNode, UID: "uid-" + betaNode, Labels: map[string]string{pool: "beta"}}},
			plainNode: {ObjectMeta: metav1.ObjectMeta{Name: plainNode}},
			// Nodes whose one exclusive GPU of evidence does not account for
			// what they offer: a replica of a shared GPU, and two GPUs by
			// a KubeVirt passthrough name.
			replicaNode: {ObjectMeta: metav1.ObjectMeta{Name: replicaNode, UID: "uid-" + replicaNode, Labels: map[string]string{pool: "acme"}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("1")}}},
			passthroughNode: {ObjectMeta: metav1.ObjectMeta{Name: passthroughNode, UID: "uid-" + passthroughNode, Labels: map[string]string{pool: "acme"}},
				Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/GH100_H100_SXM5_80GB": resource.MustParse("2")}}},
		},
		podsOn: map[string][]string{poolNode: {tenantNS + "/train-0"}},
		states: map[string]*v1alpha1.NodeSecurityStateSpec{
			poolNode:        attested(poolNode, v1alpha1.SharingExclusive),
			sharedGPU:       attested(sharedGPU, v1alpha1.SharingTimeSlicing),
			betaNode:        attested(betaNode, v1alpha1.SharingExclusive),
			replicaNode:     attested(replicaNode, v1alpha1.SharingExclusive),
			passthroughNode: attested(passthroughNode, v1alpha1.SharingExclusive),
		},
		pods: map[string]*corev1.Pod{
			"gpu-operator/p": makePod("gpu-operator").sa("device-plugin").daemonSet().obj(),
			unlabelledNS + "/p": makePod(unlabelledNS).mod(func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = privileged()
			}).obj(),
		},
	}
}

func (f *fakeCluster) Synced() bool { return f.synced }
func (f *fakeCluster) Identity(_ context.Context, ns string) (Identity, error) {
	if f.err != nil {
		return Identity{}, f.err
	}
	return f.identities[ns], nil
}
func (f *fakeCluster) Node(name string) (*corev1.Node, bool) {
	n, ok := f.nodes[name]
	return n, ok
}
func (f *fakeCluster) State(node string) (*v1alpha1.NodeSecurityStateSpec, bool) {
	s, ok := f.states[node]
	return s, ok
}
func (f *fakeCluster) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if f.err != nil {
		return nil, f.err
	}
	if p, ok := f.pods[ns+"/"+name]; ok {
		return p, nil
	}
	return makePod(ns).obj(), nil
}
func (f *fakeCluster) TenantPodsOn(_ context.Context, node string) ([]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.podsOn[node], nil
}

// fakeEvaluator answers a pod's node-independent question with a fixed
// verdict and counts those calls; questions about nodes (bindings) go to
// the real evaluator.
type fakeEvaluator struct {
	verdict wire.Verdict
	real    Evaluator
	calls   int
	last    *wire.EvaluateRequest
}

func (f *fakeEvaluator) Evaluate(req *wire.EvaluateRequest) *wire.EvaluateResponse {
	if len(req.Nodes) > 0 {
		return f.real.Evaluate(req)
	}
	f.calls++
	f.last = req
	return &wire.EvaluateResponse{Profile: guard.ProfileProduction, Pod: f.verdict, Results: []wire.NodeResult{}}
}

func allowVerdict() wire.Verdict {
	return wire.Verdict{Decision: guard.DecisionAllow, Message: "tenant acme, policy acme-policy"}
}

func newValidator(t *testing.T, c *fakeCluster, ev *fakeEvaluator) *Validator {
	t.Helper()
	ev.real = localEvaluator(t)
	v, err := New(Config{
		PoolLabel:              pool,
		SchedulerProfiles:      map[string][]string{"volcano": {"volcano.sh/job-name"}},
		TrustedServiceAccounts: []string{"gpu-operator:device-plugin"},
		Binders:                []string{scheduler, volcano, reporter},
		ReportBinders:          []string{reporter},
		RecordBinders:          []string{volcano},
		Cluster:                c,
		Evaluator:              ev,
		Profile:                guard.ProfileProduction,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// podBuilder builds pods for the tables.
type podBuilder struct{ pod *corev1.Pod }

func makePod(ns string) *podBuilder {
	return &podBuilder{&corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:      guard.SchedulerName,
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}}
}

func (b *podBuilder) scheduler(s string) *podBuilder { b.pod.Spec.SchedulerName = s; return b }
func (b *podBuilder) nodeName(n string) *podBuilder  { b.pod.Spec.NodeName = n; return b }
func (b *podBuilder) sa(s string) *podBuilder        { b.pod.Spec.ServiceAccountName = s; return b }
func (b *podBuilder) mod(f func(*corev1.PodSpec)) *podBuilder {
	f(&b.pod.Spec)
	return b
}
func (b *podBuilder) annotate(k, v string) *podBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[k] = v
	return b
}
func (b *podBuilder) label(k, v string) *podBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}

// daemonSet makes the pod a DaemonSet's.
func (b *podBuilder) daemonSet() *podBuilder {
	yes := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid", Controller: &yes})
	return b
}
func (b *podBuilder) obj() *corev1.Pod { return b.pod }

func privileged() *corev1.SecurityContext {
	t := true
	return &corev1.SecurityContext{Privileged: &t}
}

func raw(t *testing.T, obj runtime.Object) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

// request builds an AdmissionRequest.
func request(t *testing.T, resource, sub string, op admissionv1.Operation, ns, user string, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	t.Helper()
	return &admissionv1.AdmissionRequest{
		UID:         types.UID("uid-1"),
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: resource},
		SubResource: sub,
		Operation:   op,
		Namespace:   ns,
		Name:        "p",
		UserInfo:    authenticationv1.UserInfo{Username: user},
		Object:      raw(t, obj),
		OldObject:   raw(t, old),
	}
}

// post sends a review to h and decodes the answer.
func post(t *testing.T, h http.Handler, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	}
	body, _ := json.Marshal(review)
	r := httptest.NewRequest(http.MethodPost, PodsPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != req.UID {
		t.Fatalf("response does not answer uid %s: %+v", req.UID, out.Response)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Fatalf("response is %s %s", out.APIVersion, out.Kind)
	}
	return out.Response
}

// codes returns the reason codes of a refusal.
func codes(resp *admissionv1.AdmissionResponse) []string {
	if resp.Allowed || resp.Result == nil || resp.Result.Details == nil {
		return nil
	}
	var out []string
	for _, c := range resp.Result.Details.Causes {
		out = append(out, string(c.Type))
	}
	return out
}

var errBoom = errors.New("boom")

func localEvaluator(t *testing.T) Evaluator {
	t.Helper()
	e, err := evaluate.New(evaluate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
