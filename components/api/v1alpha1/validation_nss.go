package v1alpha1

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateNodeSecurityStateSpec checks evidence against the same rules as
// the CRD, for evidence that did not pass through the API server.
func ValidateNodeSecurityStateSpec(spec *NodeSecurityStateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateText(path.Child("nodeUID"), string(spec.NodeUID), 128, true)...)
	errs = append(errs, validateText(path.Child("incarnation"), spec.Incarnation, 128, true)...)
	if spec.ObservedAt.IsZero() {
		errs = append(errs, field.Required(path.Child("observedAt"), "the time the evidence was last confirmed"))
	}
	if !slices.Contains([]EvidenceSource{SourceAttested, SourceNFD, SourceMock}, spec.Source) {
		errs = append(errs, field.NotSupported(path.Child("source"), spec.Source,
			[]EvidenceSource{SourceAttested, SourceNFD, SourceMock}))
	}
	devices := path.Child("devices")
	if len(spec.Devices) > 64 {
		errs = append(errs, field.TooMany(devices, len(spec.Devices), 64))
	}
	seen := make(map[string]struct{}, len(spec.Devices))
	for i := range spec.Devices {
		d := &spec.Devices[i]
		p := devices.Index(i)
		errs = append(errs, validateDevice(d, p)...)
		if _, dup := seen[d.ID]; dup {
			errs = append(errs, field.Duplicate(p.Child("id"), d.ID))
		}
		seen[d.ID] = struct{}{}
	}
	if spec.TEE != nil {
		errs = append(errs, validateTEEFacts(spec.TEE, path.Child("tee"))...)
	}
	return errs
}

func validateDevice(d *GPUDevice, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateText(path.Child("id"), d.ID, 128, true)...)
	errs = append(errs, validateText(path.Child("vendor"), d.Vendor, 64, false)...)
	errs = append(errs, validateText(path.Child("model"), d.Model, 128, false)...)
	errs = append(errs, validateText(path.Child("migProfile"), d.MIGProfile, 64, false)...)
	if d.SharingMode != "" && !slices.Contains(GPUSharingModes, d.SharingMode) {
		errs = append(errs, field.NotSupported(path.Child("sharingMode"), d.SharingMode, GPUSharingModes))
	}
	if d.MIGProfile != "" && d.SharingMode != SharingMIG {
		errs = append(errs, field.Invalid(path.Child("migProfile"), d.MIGProfile, "migProfile needs sharingMode: MIG"))
	}
	if d.CCMode != "" && !slices.Contains(GPUCCModes, d.CCMode) {
		errs = append(errs, field.NotSupported(path.Child("ccMode"), d.CCMode, GPUCCModes))
	}
	return errs
}

func validateTEEFacts(t *TEEFacts, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(TEETypes, t.Type) {
		errs = append(errs, field.NotSupported(path.Child("type"), t.Type, TEETypes))
	}
	if t.Measurement != "" {
		errs = append(errs, ValidateMeasurement(t.Measurement, path.Child("measurement"))...)
	}
	if a := t.Attestation; a != nil {
		p := path.Child("attestation")
		if a.Verdict != AttestationPassed && a.Verdict != AttestationFailed {
			errs = append(errs, field.NotSupported(p.Child("verdict"), a.Verdict,
				[]AttestationVerdict{AttestationPassed, AttestationFailed}))
		}
		if a.VerifiedAt.IsZero() {
			errs = append(errs, field.Required(p.Child("verifiedAt"), "the time of the verdict"))
		}
		errs = append(errs, validateText(p.Child("verifier"), a.Verifier, 253, false)...)
	}
	return errs
}

func validateText(path *field.Path, s string, maxLen int, required bool) field.ErrorList {
	switch {
	case s == "" && required:
		return field.ErrorList{field.Required(path, "")}
	case len(s) > maxLen:
		return field.ErrorList{field.TooLong(path, "", maxLen)}
	}
	return nil
}
