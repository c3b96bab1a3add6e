package evidence

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/xila-guard/xila-guard/components/core/devices"

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

// mockDRADevices are the mock evidence of the devices that the driver a
// lab node names (guard.xila.us/mock-dra-driver) publishes for it in
// sl: each GPU by the uuid and model its slice states (an index-less
// device without a uuid is named by its device name), in the node's
// sharing mode unless guard.xila.us/mock-dra-devices gives it another,
// and in the node's CC mode. Only the newest generation of each pool
// counts, as for an allocator. ok is false when the annotation is
// malformed or names a device the slices do not hold, or when there are
// more than maxDevices.
func mockDRADevices(node *corev1.Node, sl []resourcev1.ResourceSlice, have int) (out []v1alpha1.GPUDevice, ok bool) {
	driver := node.Labels[guard.LabelMockDRADriver]
	if driver == "" {
		return nil, true
	}
	mode, modeOK := oneOf(node.Labels[guard.LabelMockSharingMode], v1alpha1.GPUSharingModes, true)
	cc, ccOK := oneOf(node.Labels[guard.LabelMockCCMode], v1alpha1.GPUCCModes, true)
	ok = modeOK && ccOK
	named, listed, annotationOK := mockDRAModes(node.Annotations[guard.AnnotationMockDRADevices])
	ok = ok && annotationOK

	newest := map[string]int64{}
	for i := range sl {
		s := &sl[i]
		if s.Spec.Driver == driver && s.Spec.Pool.Generation > newest[s.Spec.Pool.Name] {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	seen := map[string]bool{}
	for i := range sl {
		s := &sl[i]
		if s.Spec.Driver != driver || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			if devices.NodeOf(s, d) != node.Name {
				continue
			}
			m, isNamed := named[d.Name]
			if listed && !isNamed {
				continue
			}
			seen[d.Name] = true
			if m == "" {
				m = mode
			}
			f := devices.FactsOf(driver, d)
			g := v1alpha1.GPUDevice{ID: f.UUID, Vendor: "mock", Model: f.Model, SharingMode: m, CCMode: cc,
				DRA: &v1alpha1.DRADeviceRef{Driver: driver, Pool: s.Spec.Pool.Name, Device: d.Name}}
			if g.ID == "" {
				g.ID = d.Name
			}
			if f.Type == "mig" {
				g.MIG, g.MIGProfile, g.ParentID = true, f.MIGProfile, f.ParentUUID
			}
			out = append(out, g)
		}
	}
	for name := range named {
		ok = ok && seen[name]
	}
	slices.SortFunc(out, func(a, b v1alpha1.GPUDevice) int {
		return cmp.Or(strings.Compare(a.DRA.Pool, b.DRA.Pool), strings.Compare(a.DRA.Device, b.DRA.Device))
	})
	if have+len(out) > maxDevices {
		return out[:max(maxDevices-have, 0)], false
	}
	return out, ok
}

// mockDRAModes reads guard.xila.us/mock-dra-devices: the devices it lists,
// each with its sharing mode (empty: the node's). listed is false when
// the annotation is absent.
func mockDRAModes(v string) (modes map[string]v1alpha1.GPUSharingMode, listed, ok bool) {
	if strings.TrimSpace(v) == "" {
		return nil, false, true
	}
	modes, ok = map[string]v1alpha1.GPUSharingMode{}, true
	for _, item := range strings.Split(v, ",") {
		name, mode, _ := strings.Cut(strings.TrimSpace(item), "=")
		m, modeOK := oneOf(mode, v1alpha1.GPUSharingModes, true)
		if _, dup := modes[name]; name == "" || dup || !modeOK {
			ok = false
			continue
		}
		modes[name] = m
	}
	return modes, true, ok
}
