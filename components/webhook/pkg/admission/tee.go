package admission

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// TEEPath is the mutating endpoint that gives pods the toleration of the
// TEE taint (guard.xila.us/tee) they need.
const TEEPath = "/mutate-pods-tee"

// EnclaveResourcePrefix starts the extended resources of SGX enclaves:
// sgx.intel.com/epc, sgx.intel.com/enclave, sgx.intel.com/provision.
const EnclaveResourcePrefix = "sgx.intel.com/"

// TEEHandler serves TEEPath: at CREATE it adds to a pod
//   - a toleration of the TEE taint whatever its value, when a container
//     requests an enclave resource (sgx.intel.com/*);
//   - a toleration of the TEE taint for each TEE type its tenant's
//     policy allows (confidentialComputing.teeTypes), since the node is
//     then the pod's TEE.
//
// It never refuses: a pod it cannot judge (caches not synced, the tenant
// not resolved) is admitted unchanged, and then cannot land on a TEE node,
// which keeps its taint. The chart registers it with failurePolicy Ignore
// for the same reason: while it is down, only the pods that need a TEE
// node wait.
func (v *Validator) TEEHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		review, status, err := readReview(w, r)
		if err != nil {
			v.cfg.Metrics.malformed()
			http.Error(w, "xila-guard webhook: "+err.Error(), status)
			return
		}
		req := review.Request
		resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		if patch := v.teePatch(r.Context(), req); len(patch) > 0 {
			body, err := json.Marshal(patch)
			if err == nil {
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = body, &pt
				resp.AuditAnnotations = map[string]string{"tee-tolerations": teeValues(patch)}
			}
		}
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		body, err := json.Marshal(&out)
		if err != nil {
			http.Error(w, "xila-guard webhook: encoding the response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		v.cfg.Metrics.observe(resourceString(req), string(req.Operation), outcome{}, time.Since(start))
	})
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// teePatch returns the operations that add the tolerations the pod lacks.
func (v *Validator) teePatch(ctx context.Context, req *admissionv1.AdmissionRequest) []jsonPatchOp {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Resource.Resource != "pods" {
		return nil
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return nil
	}
	var want []corev1.Toleration
	if requestsEnclave(pod) {
		want = append(want, corev1.Toleration{Key: guard.TaintTEE, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	} else if v.cfg.Cluster.Synced() {
		ns := req.Namespace
		if ns == "" {
			ns = pod.Namespace
		}
		if id, err := v.cfg.Cluster.Identity(ctx, ns); err == nil && id.Tenant != nil && id.Policy != nil && id.Policy.Spec.ConfidentialComputing != nil {
			for _, t := range id.Policy.Spec.ConfidentialComputing.TEETypes {
				want = append(want, corev1.Toleration{Key: guard.TaintTEE, Operator: corev1.TolerationOpEqual, Value: string(t), Effect: corev1.TaintEffectNoSchedule})
			}
		}
	}
	var ops []jsonPatchOp
	have := pod.Spec.Tolerations
	for _, t := range want {
		taint := corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
		if slices.ContainsFunc(have, func(h corev1.Toleration) bool { return h.ToleratesTaint(klog.Background(), &taint, false) }) {
			continue
		}
		if len(have) == 0 && len(ops) == 0 {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/tolerations", Value: []corev1.Toleration{t}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/spec/tolerations/-", Value: t})
		}
	}
	return ops
}

// requestsEnclave reports whether a container or init container requests
// or limits an enclave resource.
func requestsEnclave(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for name := range rl {
					if strings.HasPrefix(string(name), EnclaveResourcePrefix) {
						return true
					}
				}
			}
		}
	}
	return false
}

// teeValues names the tolerations a patch adds, for the audit annotation.
func teeValues(ops []jsonPatchOp) string {
	var vals []string
	for _, op := range ops {
		switch t := op.Value.(type) {
		case corev1.Toleration:
			vals = append(vals, tolerationString(t))
		case []corev1.Toleration:
			for _, x := range t {
				vals = append(vals, tolerationString(x))
			}
		}
	}
	return strings.Join(vals, ",")
}

func tolerationString(t corev1.Toleration) string {
	if t.Operator == corev1.TolerationOpExists {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}
