package evaluate

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// input is a request prepared once and shared by every node.
type input struct {
	tenant  *wire.Tenant
	policy  *wire.Policy
	profile guard.Profile
	now     time.Time
	skew    time.Duration

	// Quoted once for the messages of every node.
	policyQ, tenantQ, poolQ string

	// Resolved from the policy, with defaults applied.
	pool         string
	confinement  v1alpha1.Confinement
	maxAge       time.Duration
	maxAttestAge time.Duration
	sharing      *v1alpha1.GPUSharingPolicy
	cc           *v1alpha1.ConfidentialComputingPolicy
	needsTEE     bool
	// gpuRules is true when the policy has rules about GPUs: sharing
	// modes or a GPU CC mode.
	gpuRules bool
	// devicesByClaim is the request's DevicesByClaim.
	devicesByClaim bool

	// memo, when set, remembers messages; see withMemo.
	memo *memo
}

func newInput(req *wire.EvaluateRequest, profile guard.Profile, now time.Time, skew time.Duration) *input {
	in := &input{tenant: req.Tenant, policy: req.Policy, profile: profile, now: now, skew: skew, devicesByClaim: req.DevicesByClaim}
	if in.tenant != nil {
		in.pool = in.tenant.PoolName()
		in.tenantQ, in.poolQ = quote(in.tenant.ID), quote(in.pool)
	}
	if in.policy == nil {
		return in
	}
	in.policyQ = quote(in.policy.Name)
	spec := &in.policy.Spec
	in.confinement = spec.Confinement
	in.maxAge = v1alpha1.DefaultMaxEvidenceAge
	if spec.Evidence.MaxAge != nil {
		in.maxAge = spec.Evidence.MaxAge.Duration
	}
	in.sharing = spec.GPUSharing
	if in.sharing != nil && len(in.sharing.AllowedModes) == 0 && len(in.sharing.ForbiddenModes) == 0 {
		in.sharing = nil
	}
	if cc := spec.ConfidentialComputing; cc != nil {
		in.cc = cc
		in.needsTEE = len(cc.TEETypes) > 0 || len(cc.AllowedMeasurements) > 0 || len(cc.ReferenceValues) > 0 ||
			cc.MinSNPTCB != nil || cc.MinTDXTCBSVN != "" || cc.RequireAttestation
		in.maxAttestAge = v1alpha1.DefaultMaxAttestationAge
		if cc.MaxAttestationAge != nil {
			in.maxAttestAge = cc.MaxAttestationAge.Duration
		}
	}
	in.gpuRules = in.sharing != nil || (in.cc != nil && in.cc.GPUCCMode != "")
	return in
}

// podVerdict is stage 1: what can be said without looking at any node.
func (in *input) podVerdict() wire.Verdict {
	var findings []finding
	if in.tenant == nil || in.tenant.ID == "" {
		findings = append(findings, finding{guard.ReasonTenantUnresolved,
			"the pod's tenant could not be resolved: exactly one TenantBinding must list its namespace"})
	}
	if in.policy == nil {
		findings = append(findings, finding{guard.ReasonNoPolicy,
			"no PlacementPolicy applies: the TenantBinding has no effectivePolicyRef and the namespace no " + guard.AnnotationPolicy + " annotation"})
	}
	if len(findings) > 0 {
		return verdict(findings, "")
	}
	return verdict(nil, "tenant "+in.tenantQ+", policy "+in.policyQ+", profile "+string(in.profile))
}

// quote renders a name for messages: as it is when it is a plain token, as
// Kubernetes names are, and Go-quoted otherwise, so that an empty or odd
// value cannot blur the message. Plain names also keep the JSON answer
// free of escapes.
func quote(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == ':') {
			return strconv.Quote(s)
		}
	}
	return s
}

// quoteList renders values for messages: [a b c].
func quoteList[T ~string](values []T) string {
	if len(values) == 0 {
		return "[]"
	}
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = string(v)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// age renders a duration for messages, to the second.
func age(d time.Duration) string {
	return d.Round(time.Second).String()
}

func contains[T comparable](values []T, v T) bool { return slices.Contains(values, v) }
