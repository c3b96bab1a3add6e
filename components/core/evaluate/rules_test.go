package evaluate

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

// outcome is what the rule tests compare: the decision and its reasons.
type outcome struct {
	Decision guard.Decision
	Reasons  []guard.Reason
}

type ruleCase struct {
	name string
	// profile is the evaluator's; empty means production.
	profile guard.Profile
	// req is changed from request(poolNode(compliantState())).
	req         func(*wire.EvaluateRequest)
	want        outcome
	wantMessage string
}

func allow(reasons ...guard.Reason) outcome {
	return outcome{guard.DecisionAllow, append([]guard.Reason{}, reasons...)}
}
func deny(reasons ...guard.Reason) outcome {
	return outcome{guard.DecisionDeny, reasons}
}
func indeterminate(reasons ...guard.Reason) outcome {
	return outcome{guard.DecisionIndeterminate, reasons}
}

// withState changes the first node's evidence.
func withState(mutate ...func(*v1alpha1.NodeSecurityStateSpec)) func(*wire.EvaluateRequest) {
	return func(r *wire.EvaluateRequest) { r.Nodes[0].State = compliantState(mutate...) }
}

// withPolicy changes the policy.
func withPolicy(mutate ...func(*v1alpha1.PlacementPolicySpec)) func(*wire.EvaluateRequest) {
	return func(r *wire.EvaluateRequest) { r.Policy = strictPolicy(mutate...) }
}

func both(fs ...func(*wire.EvaluateRequest)) func(*wire.EvaluateRequest) {
	return func(r *wire.EvaluateRequest) {
		for _, f := range fs {
			f(r)
		}
	}
}

func TestRequestRules(t *testing.T) { runRuleCases(t, requestRulesCases()) }

func TestPlacementRules(t *testing.T) { runRuleCases(t, placementRulesCases()) }

func TestAdmissibilityRules(t *testing.T) { runRuleCases(t, admissibilityRulesCases()) }

func TestConsistencyRules(t *testing.T) { runRuleCases(t, consistencyRulesCases()) }

func TestSharingRules(t *testing.T) { runRuleCases(t, sharingRulesCases()) }

func TestConfidentialComputingRules(t *testing.T) { runRuleCases(t, confidentialComputingRulesCases()) }

func TestReferenceRules(t *testing.T) { runRuleCases(t, referenceRuleCases()) }

func TestContentRulesCombine(t *testing.T) { runRuleCases(t, contentRulesCombineCases()) }

func TestGPUCountRules(t *testing.T) {
	t.Run("G-NODE-GPUS the GPUs a node offers against its evidence", func(t *testing.T) { runRuleCases(t, gpuCountRulesCases()) })
}

// allRuleCases lists every rule case, for the tests that look across them.
func allRuleCases() [][]ruleCase {
	return [][]ruleCase{requestRulesCases(), placementRulesCases(), admissibilityRulesCases(), gpuCountRulesCases(),
		consistencyRulesCases(), sharingRulesCases(), confidentialComputingRulesCases(), referenceRuleCases(), contentRulesCombineCases()}
}

// evaluate runs the case's request through an evaluator of its profile.
func (tc *ruleCase) evaluate(t *testing.T) wire.NodeResult {
	t.Helper()
	req := request(poolNode(compliantState()))
	if tc.req != nil {
		tc.req(req)
	}
	resp := newEvaluator(tc.profile).Evaluate(req)
	if len(resp.Results) != 1 {
		t.Fatalf("got %d results, want 1", len(resp.Results))
	}
	return resp.Results[0]
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.evaluate(t)
			if diff := cmp.Diff(tc.want, outcome{got.Decision, got.Reasons}); diff != "" {
				t.Errorf("outcome mismatch (-want +got):\n%s\nmessage: %s", diff, got.Message)
			}
			if !strings.Contains(got.Message, tc.wantMessage) {
				t.Errorf("message %q does not contain %q", got.Message, tc.wantMessage)
			}
			for _, r := range got.Reasons {
				if !strings.Contains(got.Message, string(r)) {
					t.Errorf("message %q does not name reason %s", got.Message, r)
				}
			}
		})
	}
}

func requestRulesCases() []ruleCase {
	return []ruleCase{{
		name:        "compliant node is allowed",
		want:        allow(),
		wantMessage: "allowed by policy strict: nfd evidence observed 1m0s ago",
	}, {
		name: "tenant not resolved",
		req:  func(r *wire.EvaluateRequest) { r.Tenant = nil },
		want: indeterminate(guard.ReasonTenantUnresolved),
	}, {
		name: "tenant with an empty id is not resolved",
		req:  func(r *wire.EvaluateRequest) { r.Tenant = &wire.Tenant{} },
		want: indeterminate(guard.ReasonTenantUnresolved),
	}, {
		name: "no policy",
		req:  func(r *wire.EvaluateRequest) { r.Policy = nil },
		want: indeterminate(guard.ReasonNoPolicy),
	}, {
		name: "neither tenant nor policy, even on a node outside every pool",
		req: func(r *wire.EvaluateRequest) {
			r.Tenant, r.Policy, r.Nodes[0].Pool = nil, nil, ""
		},
		want: indeterminate(guard.ReasonTenantUnresolved, guard.ReasonNoPolicy),
	}}
}

func placementRulesCases() []ruleCase {
	inNoPool := func(r *wire.EvaluateRequest) { r.Nodes[0].Pool = "" }
	confinement := func(c v1alpha1.Confinement) func(*wire.EvaluateRequest) {
		return withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.Confinement = c })
	}
	return []ruleCase{{
		name:        "node in another tenant's pool",
		req:         func(r *wire.EvaluateRequest) { r.Nodes[0].Pool = "globex" },
		want:        deny(guard.ReasonTenantMismatch),
		wantMessage: "pool globex, not in pool acme of tenant acme",
	}, {
		name: "node in no pool under confinement Pool",
		req:  inNoPool,
		want: deny(guard.ReasonOutsidePool),
	}, {
		name: "node in no pool with confinement unset defaults to Pool",
		req:  both(inNoPool, confinement("")),
		want: deny(guard.ReasonOutsidePool),
	}, {
		name: "unknown confinement is treated as Pool",
		req:  both(inNoPool, confinement("Anywhere")),
		want: deny(guard.ReasonOutsidePool),
	}, {
		name: "node in no pool under confinement Any is allowed without evidence",
		req: both(inNoPool, confinement(v1alpha1.ConfinementAny),
			func(r *wire.EvaluateRequest) { r.Nodes[0].State = nil }),
		want:        allow(guard.ReasonUnguardedNode),
		wantMessage: "evidence is not checked",
	}, {
		name: "another tenant's pool stays closed under confinement Any",
		req:  both(confinement(v1alpha1.ConfinementAny), func(r *wire.EvaluateRequest) { r.Nodes[0].Pool = "globex" }),
		want: deny(guard.ReasonTenantMismatch),
	}, {
		name: "own pool is still guarded under confinement Any",
		req:  both(confinement(v1alpha1.ConfinementAny), func(r *wire.EvaluateRequest) { r.Nodes[0].State = nil }),
		want: indeterminate(guard.ReasonEvidenceMissing),
	}, {
		name: "tenant with a pool name of its own",
		req: func(r *wire.EvaluateRequest) {
			r.Tenant = &wire.Tenant{ID: "acme", Pool: "acme-gpu"}
			r.Nodes[0].Pool = "acme-gpu"
		},
		want: allow(),
	}, {
		name: "pool named after the tenant is not the tenant's when it set another pool",
		req:  func(r *wire.EvaluateRequest) { r.Tenant = &wire.Tenant{ID: "acme", Pool: "acme-gpu"} },
		want: deny(guard.ReasonTenantMismatch),
	}}
}

func admissibilityRulesCases() []ruleCase {
	source := func(s v1alpha1.EvidenceSource) func(*v1alpha1.NodeSecurityStateSpec) {
		return func(st *v1alpha1.NodeSecurityStateSpec) { st.Source = s }
	}
	observed := func(d time.Duration) func(*v1alpha1.NodeSecurityStateSpec) {
		return func(st *v1alpha1.NodeSecurityStateSpec) { st.ObservedAt = ago(d) }
	}
	incomplete := func(st *v1alpha1.NodeSecurityStateSpec) { st.Complete = false }
	return []ruleCase{{
		name:        "no evidence",
		req:         func(r *wire.EvaluateRequest) { r.Nodes[0].State = nil },
		want:        indeterminate(guard.ReasonEvidenceMissing),
		wantMessage: "no NodeSecurityState",
	}, {
		name: "evidence of another node with the same name",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "uid-old" }),
		want: indeterminate(guard.ReasonEvidenceNodeMismatch),
	}, {
		name: "node UID unknown to the caller is not compared",
		req:  func(r *wire.EvaluateRequest) { r.Nodes[0].UID = "" },
		want: allow(),
	}, {
		name:        "production never accepts mock",
		req:         withState(source(v1alpha1.SourceMock)),
		want:        indeterminate(guard.ReasonSourceNotAccepted),
		wantMessage: "production profile never accepts it",
	}, {
		name:        "lab accepts mock as simulated integration",
		profile:     guard.ProfileLab,
		req:         withState(source(v1alpha1.SourceMock)),
		want:        allow(guard.ReasonSimulatedEvidence),
		wantMessage: "proves integration, not isolation",
	}, {
		name:    "a lab evaluator honours a request for production",
		profile: guard.ProfileLab,
		req: both(withState(source(v1alpha1.SourceMock)),
			func(r *wire.EvaluateRequest) { r.Profile = guard.ProfileProduction }),
		want: indeterminate(guard.ReasonSourceNotAccepted),
	}, {
		name: "a production evaluator ignores a request for lab",
		req: both(withState(source(v1alpha1.SourceMock)),
			func(r *wire.EvaluateRequest) { r.Profile = guard.ProfileLab }),
		want: indeterminate(guard.ReasonSourceNotAccepted),
	}, {
		name:    "an unknown requested profile is production",
		profile: guard.ProfileLab,
		req: both(withState(source(v1alpha1.SourceMock)),
			func(r *wire.EvaluateRequest) { r.Profile = "relaxed" }),
		want: indeterminate(guard.ReasonSourceNotAccepted),
	}, {
		name: "source the policy does not list",
		req: both(withState(source(v1alpha1.SourceAttested)), withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.Evidence.AcceptedSources = []v1alpha1.EvidenceSource{v1alpha1.SourceNFD}
		})),
		want:        indeterminate(guard.ReasonSourceNotAccepted),
		wantMessage: "source attested is not among the accepted sources [nfd] of policy strict",
	}, {
		name: "unknown source",
		req:  withState(source("rumour")),
		want: indeterminate(guard.ReasonSourceNotAccepted),
	}, {
		name: "empty source",
		req:  withState(source("")),
		want: indeterminate(guard.ReasonSourceNotAccepted),
	}, {
		name:        "stale evidence",
		req:         withState(observed(11 * time.Minute)),
		want:        indeterminate(guard.ReasonEvidenceStale),
		wantMessage: "observed 11m0s ago, more than maxAge 10m0s",
	}, {
		name: "evidence exactly maxAge old is fresh",
		req:  withState(observed(10 * time.Minute)),
		want: allow(),
	}, {
		name: "maxAge defaults to 10m",
		req: both(withState(observed(10*time.Minute+time.Second)),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.Evidence.MaxAge = nil })),
		want: indeterminate(guard.ReasonEvidenceStale),
	}, {
		name: "evidence without observedAt is stale",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.ObservedAt.Time = time.Time{} }),
		want: indeterminate(guard.ReasonEvidenceStale),
	}, {
		name:        "evidence from the future",
		req:         withState(observed(-time.Minute)),
		want:        indeterminate(guard.ReasonClockSkew),
		wantMessage: "1m0s in the future",
	}, {
		name: "evidence slightly ahead within the clock skew",
		req:  withState(observed(-20 * time.Second)),
		want: allow(),
	}, {
		name:        "publisher marked the evidence incomplete",
		req:         withState(incomplete),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "marked the evidence incomplete",
	}, {
		name:        "sharing mode unknown while the policy restricts sharing",
		req:         withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = "" })),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "devices[gpu-0].sharingMode, devices[gpu-1].sharingMode",
	}, {
		name: "sharing mode unknown does not matter without sharing rules",
		req: both(withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = "" })),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = &v1alpha1.GPUSharingPolicy{} })),
		want: allow(),
	}, {
		name:        "CC mode unknown while the policy requires one",
		req:         withState(allDevices(func(d *v1alpha1.GPUDevice) { d.CCMode = "" })),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "devices[gpu-0].ccMode",
	}, {
		name:        "measurement unknown while the policy lists measurements",
		req:         withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Measurement = "" }),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "tee.measurement",
	}, {
		name: "unknown TEE type is a missing fact",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Type = "Enclave9" }),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}, {
		name: "every admissibility problem is reported, in a fixed order",
		req: withState(source(v1alpha1.SourceMock), observed(time.Hour), incomplete,
			func(s *v1alpha1.NodeSecurityStateSpec) { s.NodeUID = "uid-old" }),
		want: indeterminate(guard.ReasonEvidenceNodeMismatch, guard.ReasonSourceNotAccepted,
			guard.ReasonEvidenceStale, guard.ReasonEvidenceIncomplete),
	}, {
		name: "stale evidence is indeterminate even when it shows a violation",
		req: withState(observed(time.Hour),
			allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing })),
		want: indeterminate(guard.ReasonEvidenceStale),
	}}
}

func consistencyRulesCases() []ruleCase {
	second := func(f func(*v1alpha1.GPUDevice)) func(*wire.EvaluateRequest) {
		return withState(func(s *v1alpha1.NodeSecurityStateSpec) { f(&s.Devices[1]) })
	}
	return []ruleCase{{
		name:        "devices disagree on sharing mode",
		req:         second(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing }),
		want:        indeterminate(guard.ReasonMixedPool),
		wantMessage: "disagree on sharingMode: gpu-0 has Exclusive, gpu-1 has TimeSlicing",
	}, {
		name: "devices disagree on MIG profile",
		req: both(withState(allDevices(func(d *v1alpha1.GPUDevice) {
			d.SharingMode, d.MIGProfile = v1alpha1.SharingMIG, "1g.10gb"
		})), second(func(d *v1alpha1.GPUDevice) { d.SharingMode, d.MIGProfile = v1alpha1.SharingMIG, "3g.40gb" })),
		want: indeterminate(guard.ReasonMixedPool),
	}, {
		name: "devices disagree on CC mode",
		req:  second(func(d *v1alpha1.GPUDevice) { d.CCMode = v1alpha1.CCModeDevTools }),
		want: indeterminate(guard.ReasonMixedPool),
	}, {
		name: "devices of different models agree on what the rules judge",
		req:  second(func(d *v1alpha1.GPUDevice) { d.Model = "A100" }),
		want: allow(),
	}, {
		name: "devices disagree on MIG",
		req: both(withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing }),
			func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices[1].MIG = true }),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil })),
		want:        indeterminate(guard.ReasonMixedPool),
		wantMessage: "disagree on MIG: gpu-1 is MIG-partitioned, gpu-0 is not",
	}, {
		name: "the older sharingMode MIG agrees with mig and Exclusive",
		req: withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode, d.MIGProfile = v1alpha1.SharingMIG, "1g.10gb" }),
			func(s *v1alpha1.NodeSecurityStateSpec) {
				s.Devices[1].MIG, s.Devices[1].SharingMode = true, v1alpha1.SharingExclusive
			}),
		want: allow(),
	}}
}

func sharingRulesCases() []ruleCase {
	mode := func(m v1alpha1.GPUSharingMode) func(*wire.EvaluateRequest) {
		return withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = m }))
	}
	allowOnly := func(modes ...v1alpha1.GPUSharingMode) func(*wire.EvaluateRequest) {
		return withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.GPUSharing = &v1alpha1.GPUSharingPolicy{AllowedModes: modes}
		})
	}
	return []ruleCase{{
		name:        "time-slicing forbidden",
		req:         mode(v1alpha1.SharingTimeSlicing),
		want:        deny(guard.ReasonTimeSlicingForbidden),
		wantMessage: "2 GPU(s) are shared by TimeSlicing and policy strict forbids it",
	}, {
		name: "MPS forbidden",
		req:  mode(v1alpha1.SharingMPS),
		want: deny(guard.ReasonMPSForbidden),
	}, {
		name: "MIG not among the allowed modes",
		req:  both(mode(v1alpha1.SharingMIG), allowOnly(v1alpha1.SharingExclusive)),
		want: deny(guard.ReasonMIGForbidden),
	}, {
		name:        "exclusive not among the allowed modes",
		req:         allowOnly(v1alpha1.SharingMIG),
		want:        deny(guard.ReasonExclusiveForbidden),
		wantMessage: "allows only [MIG]",
	}, {
		name: "time-slicing not among the allowed modes",
		req:  both(mode(v1alpha1.SharingTimeSlicing), allowOnly(v1alpha1.SharingExclusive, v1alpha1.SharingMIG)),
		want: deny(guard.ReasonTimeSlicingForbidden),
	}, {
		name: "MIG allowed",
		req: both(withState(allDevices(func(d *v1alpha1.GPUDevice) {
			d.SharingMode, d.MIGProfile = v1alpha1.SharingMIG, "1g.10gb"
		})), allowOnly(v1alpha1.SharingMIG)),
		want: allow(),
	}, {
		name: "no sharing rules allow any mode",
		req: both(mode(v1alpha1.SharingTimeSlicing),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil })),
		want: allow(),
	}, {
		name:        "time-sliced MIG slices are time-sliced",
		req:         migSliced(v1alpha1.SharingTimeSlicing),
		want:        deny(guard.ReasonTimeSlicingForbidden),
		wantMessage: "shared by TimeSlicing and policy strict forbids it",
	}, {
		name: "MPS on MIG slices where MPS is forbidden",
		req:  migSliced(v1alpha1.SharingMPS),
		want: deny(guard.ReasonMPSForbidden),
	}, {
		name: "MIG allowed but time-slicing forbidden",
		req: both(migSliced(v1alpha1.SharingTimeSlicing), withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.GPUSharing = &v1alpha1.GPUSharingPolicy{AllowedModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingExclusive, v1alpha1.SharingMIG},
				ForbiddenModes: []v1alpha1.GPUSharingMode{v1alpha1.SharingTimeSlicing}}
		})),
		want: deny(guard.ReasonTimeSlicingForbidden),
	}, {
		name:        "MIG and time-slicing each refused with its own reason",
		req:         both(migSliced(v1alpha1.SharingTimeSlicing), allowOnly(v1alpha1.SharingExclusive)),
		want:        deny(guard.ReasonMIGForbidden, guard.ReasonTimeSlicingForbidden),
		wantMessage: "shared by MIG and policy strict allows only [Exclusive]",
	}, {
		name: "time-sliced MIG slices allowed when both modes are",
		req:  both(migSliced(v1alpha1.SharingTimeSlicing), allowOnly(v1alpha1.SharingMIG, v1alpha1.SharingTimeSlicing)),
		want: allow(),
	}, {
		name: "exclusive MIG slices are judged as MIG alone",
		req:  both(migSliced(v1alpha1.SharingExclusive), allowOnly(v1alpha1.SharingMIG)),
		want: allow(),
	}, {
		name: "exclusive MIG slices where only whole GPUs are allowed",
		req:  both(migSliced(v1alpha1.SharingExclusive), allowOnly(v1alpha1.SharingExclusive)),
		want: deny(guard.ReasonMIGForbidden),
	}, {
		name: "mig with the older sharingMode MIG",
		req:  both(migSliced(v1alpha1.SharingMIG), allowOnly(v1alpha1.SharingMIG)),
		want: allow(),
	}, {
		name:        "MIG slices whose sharing is unknown while the policy restricts sharing",
		req:         migSliced(""),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "devices[gpu-0].sharingMode",
	}}
}

// migSliced makes every device a MIG slice shared by mode.
func migSliced(mode v1alpha1.GPUSharingMode) func(*wire.EvaluateRequest) {
	return withState(allDevices(func(d *v1alpha1.GPUDevice) {
		d.MIG, d.SharingMode, d.MIGProfile = true, mode, "1g.10gb"
	}))
}

// withAllocatable sets the GPUs the first node offers pods.
func withAllocatable(n int64) func(*wire.EvaluateRequest) {
	return func(r *wire.EvaluateRequest) { r.Nodes[0].AllocatableGPUs = &n }
}

func gpuCountRulesCases() []ruleCase {
	noDevices := withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices = nil })
	mode := func(m v1alpha1.GPUSharingMode) func(*wire.EvaluateRequest) {
		return withState(allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = m }))
	}
	anySharing := withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing = nil })
	noGPURules := withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.GPUSharing, p.ConfidentialComputing.GPUCCMode = nil, "" })
	return []ruleCase{{
		name: "allocatable GPUs equal to the devices",
		req:  withAllocatable(2),
		want: allow(),
	}, {
		name: "allocatable GPUs unknown are not checked",
		req:  func(r *wire.EvaluateRequest) { r.Nodes[0].AllocatableGPUs = nil },
		want: allow(),
	}, {
		name: "no allocatable GPUs is not held against the devices listed",
		req:  withAllocatable(0),
		want: allow(),
	}, {
		name:        "allocatable GPUs and no device in the evidence",
		req:         both(noDevices, noGPURules, withAllocatable(8)),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "the node offers 8 GPU(s) to pods (allocatableGPUs) but the evidence lists no GPU device",
	}, {
		name:        "more allocatable GPUs than exclusive devices",
		req:         withAllocatable(4),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "offers 4 GPU(s) to pods (allocatableGPUs) but the evidence lists 2 GPU device(s), and only time-sliced or MPS-shared devices are offered more than once",
	}, {
		name: "fewer allocatable GPUs than devices",
		req:  withAllocatable(1),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}, {
		name: "replicas of shared GPUs on evidence of exclusive devices",
		req: both(withAllocatable(2), func(r *wire.EvaluateRequest) {
			shared := int64(2)
			r.Nodes[0].AllocatableSharedGPUs = &shared
		}),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "the node offers 2 replica(s) of shared GPUs to pods (allocatableSharedGPUs, such as nvidia.com/gpu.shared) but the evidence describes no device as time-sliced or MPS-shared",
	}, {
		name: "replicas of shared GPUs on evidence of time-sliced devices",
		req: both(mode(v1alpha1.SharingTimeSlicing), anySharing, withAllocatable(8), func(r *wire.EvaluateRequest) {
			shared := int64(8)
			r.Nodes[0].AllocatableSharedGPUs = &shared
		}),
		want: allow(),
	}, {
		name: "time-sliced replicas, a multiple of the devices",
		req:  both(mode(v1alpha1.SharingTimeSlicing), anySharing, withAllocatable(8)),
		want: allow(),
	}, {
		name:        "time-sliced replicas, not a multiple of the devices",
		req:         both(mode(v1alpha1.SharingTimeSlicing), anySharing, withAllocatable(5)),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "lists 2 time-sliced or MPS-shared GPU device(s), which are offered in equal numbers of replicas: a multiple of 2",
	}, {
		name: "MPS replicas, a multiple of the devices",
		req:  both(mode(v1alpha1.SharingMPS), anySharing, withAllocatable(6)),
		want: allow(),
	}, {
		name: "time-sliced replicas of MIG slices",
		req:  both(migSliced(v1alpha1.SharingTimeSlicing), anySharing, withAllocatable(14)),
		want: allow(),
	}, {
		name: "exclusive MIG slices are offered one each",
		req:  both(migSliced(v1alpha1.SharingMIG), withAllocatable(4)),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}, {
		name: "replicas that agree with the devices are still judged by the sharing rules",
		req:  both(mode(v1alpha1.SharingTimeSlicing), withAllocatable(8)),
		want: deny(guard.ReasonTimeSlicingForbidden),
	}, {
		name:        "sharing rules and no device in the evidence",
		req:         both(noDevices, withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.ConfidentialComputing.GPUCCMode = "" })),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "policy strict restricts GPU sharing modes, but the evidence lists no GPU device to judge",
	}, {
		name:        "a GPU CC mode and no device in the evidence",
		req:         both(noDevices, anySharing),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "policy strict requires GPU CC mode On, but the evidence lists no GPU device to judge",
	}, {
		name: "GPU rules and no device, even when the node offers no GPU",
		req:  both(noDevices, withAllocatable(0)),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}, {
		name: "a node without GPUs under a policy without GPU rules",
		req:  both(noDevices, noGPURules, withAllocatable(0)),
		want: allow(),
	}, {
		name: "a policy whose sharing rules are empty has no GPU rules",
		req: both(noDevices, withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.GPUSharing, p.ConfidentialComputing.GPUCCMode = &v1alpha1.GPUSharingPolicy{}, ""
		})),
		want: allow(),
	}, {
		name:        "a miscount is reported with the publisher's own doubt",
		req:         both(withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.Complete = false }), withAllocatable(3)),
		want:        indeterminate(guard.ReasonEvidenceIncomplete),
		wantMessage: "the publisher marked the evidence incomplete, and the node offers 3 GPU(s) to pods",
	}}
}

func confidentialComputingRulesCases() []ruleCase {
	attestation := func(f func(*v1alpha1.Attestation)) func(*wire.EvaluateRequest) {
		return withState(func(s *v1alpha1.NodeSecurityStateSpec) { f(s.TEE.Attestation) })
	}
	return []ruleCase{{
		name:        "GPU CC mode differs",
		req:         withState(allDevices(func(d *v1alpha1.GPUDevice) { d.CCMode = v1alpha1.CCModeOff })),
		want:        deny(guard.ReasonCCModeMismatch),
		wantMessage: "CC mode Off, policy strict requires On",
	}, {
		name: "no TEE",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE = nil }),
		want: deny(guard.ReasonTEEMissing),
	}, {
		name: "attestation alone requires a TEE",
		req: both(withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE = nil }),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
				p.ConfidentialComputing = &v1alpha1.ConfidentialComputingPolicy{RequireAttestation: true}
			})),
		want: deny(guard.ReasonTEEMissing),
	}, {
		name: "no TEE needed when the policy only sets a GPU CC mode",
		req: both(withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE = nil }),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
				p.ConfidentialComputing = &v1alpha1.ConfidentialComputingPolicy{GPUCCMode: v1alpha1.CCModeOn}
			})),
		want: allow(),
	}, {
		name:        "TEE type not allowed",
		req:         withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Type = v1alpha1.TEESGX }),
		want:        deny(guard.ReasonTEETypeNotAllowed),
		wantMessage: "TEE is SGX, policy strict allows [SEV-SNP TDX]",
	}, {
		name: "launch measurement not allowed",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Measurement = measurementB }),
		want: deny(guard.ReasonMeasurementNotAllowed),
	}, {
		name: "attestation missing",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation = nil }),
		want: indeterminate(guard.ReasonAttestationMissing),
	}, {
		name: "attestation with an unknown verdict counts as missing",
		req:  attestation(func(a *v1alpha1.Attestation) { a.Verdict = "Maybe" }),
		want: indeterminate(guard.ReasonAttestationMissing),
	}, {
		name: "attestation failed",
		req:  attestation(func(a *v1alpha1.Attestation) { a.Verdict = v1alpha1.AttestationFailed }),
		want: deny(guard.ReasonAttestationFailed),
	}, {
		name:        "attestation stale",
		req:         attestation(func(a *v1alpha1.Attestation) { a.VerifiedAt = ago(2 * time.Hour) }),
		want:        indeterminate(guard.ReasonAttestationStale),
		wantMessage: "more than maxAttestationAge 1h0m0s",
	}, {
		name: "attestation age defaults to 1h",
		req: both(attestation(func(a *v1alpha1.Attestation) { a.VerifiedAt = ago(61 * time.Minute) }),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.ConfidentialComputing.MaxAttestationAge = nil })),
		want: indeterminate(guard.ReasonAttestationStale),
	}, {
		name: "attestation without a time is stale",
		req:  attestation(func(a *v1alpha1.Attestation) { a.VerifiedAt.Time = time.Time{} }),
		want: indeterminate(guard.ReasonAttestationStale),
	}, {
		name: "attestation from the future",
		req:  attestation(func(a *v1alpha1.Attestation) { a.VerifiedAt = ago(-time.Hour) }),
		want: indeterminate(guard.ReasonClockSkew),
	}, {
		name: "attestation is not checked unless required",
		req: both(withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Attestation = nil }),
			withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
				p.ConfidentialComputing.RequireAttestation, p.ConfidentialComputing.MaxAttestationAge = false, nil
			})),
		want: allow(),
	}, {
		name: "evidence the verifier refused: the failure decides, not the facts it lacks",
		req: withState(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Measurement = ""
			s.TEE.Attestation.Verdict, s.TEE.Attestation.Reason = v1alpha1.AttestationFailed, guard.ReasonTestRootOfTrust
		}),
		want:        deny(guard.ReasonAttestationFailed),
		wantMessage: "failed at 2026-03-01T11:55:00Z: TEST_ROOT_OF_TRUST",
	}, {
		name: "a measurement missing is incomplete when the attestation did not fail",
		req:  withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Measurement = "" }),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}}
}

// referenceValues makes policy strict with reference values instead of
// allowed measurements.
func referenceValues(refs ...v1alpha1.MeasurementReference) func(*v1alpha1.PlacementPolicySpec) {
	return func(p *v1alpha1.PlacementPolicySpec) {
		p.ConfidentialComputing.AllowedMeasurements, p.ConfidentialComputing.ReferenceValues = nil, refs
	}
}

func referenceRuleCases() []ruleCase {
	hostData := strings.Repeat("4", 64)
	until := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	snp := func(bl, tee, fw, mc int32) *v1alpha1.SNPTCB {
		return &v1alpha1.SNPTCB{BootLoader: bl, TEE: tee, SNP: fw, Microcode: mc}
	}
	return []ruleCase{{
		name: "reference value matched",
		req:  withPolicy(referenceValues(v1alpha1.MeasurementReference{Measurement: measurementA})),
		want: allow(),
	}, {
		name: "reference value with its host data",
		req: both(withPolicy(referenceValues(v1alpha1.MeasurementReference{Measurement: measurementA, HostData: hostData})),
			withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.HostData = hostData })),
		want: allow(),
	}, {
		name:        "reference value with other host data",
		req:         withPolicy(referenceValues(v1alpha1.MeasurementReference{Measurement: measurementA, HostData: hostData})),
		want:        deny(guard.ReasonMeasurementNotAllowed),
		wantMessage: "matches none of the 1 reference value(s) of policy strict",
	}, {
		name:        "reference value past its notAfter",
		req:         withPolicy(referenceValues(v1alpha1.MeasurementReference{Measurement: measurementA, NotAfter: until(-time.Minute)})),
		want:        deny(guard.ReasonMeasurementExpired),
		wantMessage: "only until 2026-03-01T11:59:00Z",
	}, {
		name: "an expired reference and a current one for the same measurement",
		req: withPolicy(referenceValues(v1alpha1.MeasurementReference{Measurement: measurementA, NotAfter: until(-time.Minute)},
			v1alpha1.MeasurementReference{Measurement: measurementA, NotAfter: until(time.Hour)})),
		want: allow(),
	}, {
		name: "reference values and allowed measurements must both accept",
		req: both(withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.ConfidentialComputing.ReferenceValues = []v1alpha1.MeasurementReference{{Measurement: measurementB}}
		}), withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.Measurement = measurementB })),
		want: deny(guard.ReasonMeasurementNotAllowed),
	}, {
		name: "SEV-SNP TCB at the minimum",
		req: both(withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.ConfidentialComputing.MinSNPTCB = snp(3, 0, 8, 115) }),
			withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.SNPTCB = snp(3, 0, 8, 115) })),
		want: allow(),
	}, {
		name: "SEV-SNP microcode below the minimum",
		req: both(withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.ConfidentialComputing.MinSNPTCB = snp(3, 0, 8, 115) }),
			withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.TEE.SNPTCB = snp(9, 9, 9, 114) })),
		want:        deny(guard.ReasonTCBOutOfDate),
		wantMessage: "microcode 114} is below the minimum",
	}, {
		name: "SEV-SNP evidence without its TCB is incomplete",
		req:  withPolicy(func(p *v1alpha1.PlacementPolicySpec) { p.ConfidentialComputing.MinSNPTCB = snp(3, 0, 8, 115) }),
		want: indeterminate(guard.ReasonEvidenceIncomplete),
	}, {
		name: "a TDX minimum does not judge an SEV-SNP node",
		req: withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.ConfidentialComputing.MinTDXTCBSVN = strings.Repeat("ff", 16)
		}),
		want: allow(),
	}, {
		name: "TDX TCB one component below the minimum",
		req: both(withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.ConfidentialComputing.MinTDXTCBSVN = "0302" + strings.Repeat("00", 14)
		}), withState(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.TDXTCBSVN = v1alpha1.TEETDX, "0401"+strings.Repeat("ff", 14)
		})),
		want:        deny(guard.ReasonTCBOutOfDate),
		wantMessage: "in component 1",
	}, {
		name: "TDX TCB above the minimum in every component",
		req: both(withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.ConfidentialComputing.MinTDXTCBSVN = "0302" + strings.Repeat("00", 14)
		}), withState(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.TDXTCBSVN = v1alpha1.TEETDX, "0302"+strings.Repeat("01", 14)
		})),
		want: allow(),
	}}
}

func contentRulesCombineCases() []ruleCase {
	return []ruleCase{{
		name: "every violation is reported, in rule order",
		req: withState(
			allDevices(func(d *v1alpha1.GPUDevice) {
				d.SharingMode, d.CCMode = v1alpha1.SharingTimeSlicing, v1alpha1.CCModeOff
			}),
			func(s *v1alpha1.NodeSecurityStateSpec) {
				s.TEE.Type, s.TEE.Measurement = v1alpha1.TEESGX, measurementB
				s.TEE.Attestation.Verdict = v1alpha1.AttestationFailed
			}),
		want: deny(guard.ReasonTimeSlicingForbidden, guard.ReasonCCModeMismatch, guard.ReasonTEETypeNotAllowed,
			guard.ReasonMeasurementNotAllowed, guard.ReasonAttestationFailed),
	}, {
		name: "a violation outweighs a doubt",
		req: withState(func(s *v1alpha1.NodeSecurityStateSpec) {
			s.TEE.Measurement = measurementB
			s.TEE.Attestation.VerifiedAt = ago(3 * time.Hour)
		}),
		want: deny(guard.ReasonMeasurementNotAllowed, guard.ReasonAttestationStale),
	}, {
		name:    "a violation on mock evidence in lab is not marked simulated",
		profile: guard.ProfileLab,
		req: withState(func(s *v1alpha1.NodeSecurityStateSpec) { s.Source = v1alpha1.SourceMock },
			allDevices(func(d *v1alpha1.GPUDevice) { d.SharingMode = v1alpha1.SharingTimeSlicing })),
		want: deny(guard.ReasonTimeSlicingForbidden),
	}, {
		name: "a policy with only evidence rules",
		req: withPolicy(func(p *v1alpha1.PlacementPolicySpec) {
			p.GPUSharing, p.ConfidentialComputing = nil, nil
		}),
		want: allow(),
	}}
}
