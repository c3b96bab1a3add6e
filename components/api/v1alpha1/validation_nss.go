package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var evidenceSources = []EvidenceSource{SourceAttested, SourceNFD, SourceMock}

// ValidateNodeSecurityStateSpec checks evidence against the same rules as
// the CRD, for evidence that did not pass through the API server. Field
// paths are built only for errors: requests carry evidence of thousands of
// nodes, nearly all of it valid.
func ValidateNodeSecurityStateSpec(spec *NodeSecurityStateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = appendText(errs, path, "nodeUID", string(spec.NodeUID), 128, true)
	errs = appendText(errs, path, "incarnation", spec.Incarnation, 128, true)
	if spec.ObservedAt.IsZero() {
		errs = append(errs, field.Required(path.Child("observedAt"), "the time the evidence was last confirmed"))
	}
	if !slices.Contains(evidenceSources, spec.Source) {
		errs = append(errs, field.NotSupported(path.Child("source"), spec.Source, evidenceSources))
	}
	if len(spec.Devices) > 64 {
		// Checking each of thousands of devices would only lengthen the
		// answer, and the duplicate check is quadratic.
		errs = append(errs, field.TooMany(path.Child("devices"), len(spec.Devices), 64))
	} else {
		errs = validateDevices(errs, spec.Devices, path)
	}
	if spec.TEE != nil {
		errs = append(errs, validateTEEFacts(spec.TEE, path)...)
	}
	return errs
}

func validateDevices(errs field.ErrorList, devices []GPUDevice, spec *field.Path) field.ErrorList {
	for i := range devices {
		d := &devices[i]
		if !deviceValid(d) {
			errs = append(errs, validateDevice(d, spec.Child("devices").Index(i))...)
		}
		for j := range i {
			if devices[j].ID == d.ID {
				errs = append(errs, field.Duplicate(spec.Child("devices").Index(i).Child("id"), d.ID))
				break
			}
		}
	}
	return errs
}

// deviceValid is the cheap test that spares valid devices validateDevice.
func deviceValid(d *GPUDevice) bool {
	return d.ID != "" && len(d.ID) <= 128 && len(d.Vendor) <= 64 && len(d.Model) <= 128 && len(d.MIGProfile) <= 64 &&
		(d.SharingMode == "" || slices.Contains(GPUSharingModes, d.SharingMode)) &&
		(d.MIGProfile == "" || d.MIGPartitioned()) &&
		(d.CCMode == "" || slices.Contains(GPUCCModes, d.CCMode))
}

func validateDevice(d *GPUDevice, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = appendText(errs, path, "id", d.ID, 128, true)
	errs = appendText(errs, path, "vendor", d.Vendor, 64, false)
	errs = appendText(errs, path, "model", d.Model, 128, false)
	errs = appendText(errs, path, "migProfile", d.MIGProfile, 64, false)
	if d.SharingMode != "" && !slices.Contains(GPUSharingModes, d.SharingMode) {
		errs = append(errs, field.NotSupported(path.Child("sharingMode"), d.SharingMode, GPUSharingModes))
	}
	if d.MIGProfile != "" && !d.MIGPartitioned() {
		errs = append(errs, field.Invalid(path.Child("migProfile"), d.MIGProfile, "migProfile needs mig: true (or sharingMode: MIG)"))
	}
	if d.CCMode != "" && !slices.Contains(GPUCCModes, d.CCMode) {
		errs = append(errs, field.NotSupported(path.Child("ccMode"), d.CCMode, GPUCCModes))
	}
	return errs
}

// validateTEEFacts checks spec.tee; path is the spec's.
func validateTEEFacts(t *TEEFacts, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(TEETypes, t.Type) {
		errs = append(errs, field.NotSupported(spec.Child("tee", "type"), t.Type, TEETypes))
	}
	if t.Measurement != "" && !IsMeasurement(t.Measurement) {
		errs = append(errs, ValidateMeasurement(t.Measurement, spec.Child("tee", "measurement"))...)
	}
	if a := t.Attestation; a != nil {
		if a.Verdict != AttestationPassed && a.Verdict != AttestationFailed {
			errs = append(errs, field.NotSupported(spec.Child("tee", "attestation", "verdict"), a.Verdict,
				[]AttestationVerdict{AttestationPassed, AttestationFailed}))
		}
		if a.VerifiedAt.IsZero() {
			errs = append(errs, field.Required(spec.Child("tee", "attestation", "verifiedAt"), "the time of the verdict"))
		}
		if len(a.Verifier) > 253 {
			errs = append(errs, field.TooLong(spec.Child("tee", "attestation", "verifier"), "", 253))
		}
	}
	return errs
}

// appendText checks a string field named name under path.
func appendText(errs field.ErrorList, path *field.Path, name, s string, maxLen int, required bool) field.ErrorList {
	switch {
	case s == "" && required:
		return append(errs, field.Required(path.Child(name), ""))
	case len(s) > maxLen:
		return append(errs, field.TooLong(path.Child(name), "", maxLen))
	}
	return errs
}
