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
		len(d.ParentID) <= 128 && (d.DRA == nil || draValid(d.DRA)) &&
		(d.SharingMode == "" || slices.Contains(GPUSharingModes, d.SharingMode)) &&
		(d.MIGProfile == "" || d.MIGPartitioned()) &&
		(d.CCMode == "" || slices.Contains(GPUCCModes, d.CCMode))
}

func draValid(r *DRADeviceRef) bool {
	return r.Driver != "" && len(r.Driver) <= 63 && r.Pool != "" && len(r.Pool) <= 253 && r.Device != "" && len(r.Device) <= 128
}

func validateDevice(d *GPUDevice, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = appendText(errs, path, "id", d.ID, 128, true)
	errs = appendText(errs, path, "vendor", d.Vendor, 64, false)
	errs = appendText(errs, path, "model", d.Model, 128, false)
	errs = appendText(errs, path, "migProfile", d.MIGProfile, 64, false)
	errs = appendText(errs, path, "parentID", d.ParentID, 128, false)
	if r := d.DRA; r != nil {
		p := path.Child("dra")
		errs = appendText(errs, p, "driver", r.Driver, 63, true)
		errs = appendText(errs, p, "pool", r.Pool, 253, true)
		errs = appendText(errs, p, "device", r.Device, 128, true)
	}
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
	path := spec.Child("tee")
	if !slices.Contains(TEETypes, t.Type) {
		errs = append(errs, field.NotSupported(path.Child("type"), t.Type, TEETypes))
	}
	if t.Measurement != "" && !IsMeasurement(t.Measurement) {
		errs = append(errs, ValidateMeasurement(t.Measurement, path.Child("measurement"))...)
	}
	switch {
	case t.HostData == "":
	case !isLowerHex(t.HostData, 64, 96):
		errs = append(errs, field.Invalid(path.Child("hostData"), t.HostData, "must be 64 or 96 lowercase hex digits"))
	case !(t.Type == TEESEVSNP && len(t.HostData) == 64 || t.Type == TEETDX && len(t.HostData) == 96):
		errs = append(errs, field.Invalid(path.Child("hostData"), t.HostData,
			"hostData is 32 bytes (64 hex digits) of SEV-SNP HOST_DATA or 48 bytes (96 hex digits) of TDX MRCONFIGID"))
	}
	if tcb := t.SNPTCB; tcb != nil {
		if t.Type != TEESEVSNP {
			errs = append(errs, field.Forbidden(path.Child("snpTCB"), "snpTCB is only for SEV-SNP"))
		}
		errs = append(errs, validateSNPTCB(tcb, path.Child("snpTCB"))...)
	}
	if t.TDXTCBSVN != "" {
		if !isLowerHex(t.TDXTCBSVN, 32) {
			errs = append(errs, field.Invalid(path.Child("tdxTCBSVN"), t.TDXTCBSVN, "must be 32 lowercase hex digits"))
		}
		if t.Type != TEETDX {
			errs = append(errs, field.Forbidden(path.Child("tdxTCBSVN"), "tdxTCBSVN is only for TDX"))
		}
	}
	if t.ChipID != "" {
		if !isLowerHex(t.ChipID, 128) {
			errs = append(errs, field.Invalid(path.Child("chipID"), t.ChipID, "must be 128 lowercase hex digits"))
		}
		if t.Type != TEESEVSNP {
			errs = append(errs, field.Forbidden(path.Child("chipID"), "chipID is only for SEV-SNP"))
		}
	}
	if a := t.Attestation; a != nil {
		errs = append(errs, validateAttestation(a, path.Child("attestation"))...)
	}
	return errs
}

func validateAttestation(a *Attestation, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Verdict != AttestationPassed && a.Verdict != AttestationFailed {
		errs = append(errs, field.NotSupported(path.Child("verdict"), a.Verdict,
			[]AttestationVerdict{AttestationPassed, AttestationFailed}))
	}
	if a.VerifiedAt.IsZero() {
		errs = append(errs, field.Required(path.Child("verifiedAt"), "the time of the verdict"))
	}
	if len(a.Verifier) > 253 {
		errs = append(errs, field.TooLong(path.Child("verifier"), "", 253))
	}
	if a.Reason != "" {
		if len(a.Reason) > 64 || !isReason(string(a.Reason)) {
			errs = append(errs, field.Invalid(path.Child("reason"), a.Reason, "must be an UPPER_SNAKE reason code of at most 64 characters"))
		}
		if a.Verdict != AttestationFailed {
			errs = append(errs, field.Forbidden(path.Child("reason"), "reason is only for a Failed verdict"))
		}
	}
	if len(a.Message) > 1024 {
		errs = append(errs, field.TooLong(path.Child("message"), "", 1024))
	}
	if a.RootOfTrust != "" && !slices.Contains(RootsOfTrust, a.RootOfTrust) {
		errs = append(errs, field.NotSupported(path.Child("rootOfTrust"), a.RootOfTrust, RootsOfTrust))
	}
	return errs
}

// validateSNPTCB checks that every level of an SEV-SNP TCB is 0 to 255.
func validateSNPTCB(tcb *SNPTCB, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, v := range []int32{tcb.BootLoader, tcb.TEE, tcb.SNP, tcb.Microcode} {
		if v < 0 || v > 255 {
			name := [...]string{"bootLoader", "tee", "snp", "microcode"}[i]
			errs = append(errs, field.Invalid(path.Child(name), v, "must be 0 to 255"))
		}
	}
	return errs
}

// isLowerHex reports whether s is lowercase hex digits of one of the given
// lengths, as HostDataPattern, TDXTCBSVNPattern and ChipIDPattern say; a
// test holds them equal.
func isLowerHex(s string, lengths ...int) bool {
	if !slices.Contains(lengths, len(s)) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isReason reports whether s matches ReasonPattern.
func isReason(s string) bool {
	word := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'A' && c <= 'Z':
			word = true
		case c == '_' && word:
			word = false
		default:
			return false
		}
	}
	return word
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
