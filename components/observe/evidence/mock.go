package evidence

import (
	"slices"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// fromMockLabels reads the guard.xila.us/mock-* labels of a lab node. A
// value outside its enumeration makes the evidence incomplete.
func fromMockLabels(l map[string]string) Facts {
	f := Facts{Source: v1alpha1.SourceMock, Complete: true}
	count, ok := gpuCount(l[guard.LabelMockGPUCount], l[guard.LabelMockGPUModel] != "")
	f.Complete = ok
	if count > 0 {
		d := v1alpha1.GPUDevice{Vendor: "mock", Model: l[guard.LabelMockGPUModel]}
		d.SharingMode, ok = oneOf(l[guard.LabelMockSharingMode], v1alpha1.GPUSharingModes, false)
		f.Complete = f.Complete && ok
		if d.SharingMode == v1alpha1.SharingMIG {
			d.MIGProfile = l[guard.LabelMockMIGProfile]
		}
		d.CCMode, ok = oneOf(l[guard.LabelMockCCMode], v1alpha1.GPUCCModes, true)
		f.Complete = f.Complete && ok
		f.Devices = replicate(d, count)
	}
	if v := l[guard.LabelMockTEEType]; v != "" {
		t, ok := oneOf(v, v1alpha1.TEETypes, false)
		f.Complete = f.Complete && ok
		if ok {
			f.TEE = &v1alpha1.TEEFacts{Type: t}
			if a := l[guard.LabelMockAttestation]; a != "" {
				verdict, ok := oneOf(a, []v1alpha1.AttestationVerdict{v1alpha1.AttestationPassed, v1alpha1.AttestationFailed}, false)
				f.Complete = f.Complete && ok
				if ok {
					f.TEE.Attestation = &v1alpha1.Attestation{Verdict: verdict, Verifier: "mock"}
				}
			}
		}
	}
	return f
}

// oneOf checks v against an enumeration; empty is accepted when optional.
func oneOf[T ~string](v string, values []T, optional bool) (T, bool) {
	if v == "" {
		return "", optional
	}
	if slices.Contains(values, T(v)) {
		return T(v), true
	}
	return "", false
}
