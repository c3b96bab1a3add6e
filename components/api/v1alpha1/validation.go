package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The same expressions appear in the kubebuilder markers; a test compares
// them with the generated CRDs so that the two cannot drift apart.
const (
	// DurationPattern is the form of every duration in this API: up to four
	// Go duration components, each at most five digits so that no value
	// overflows.
	DurationPattern = `^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,4}$`
	// MeasurementPattern is the form of a TEE launch measurement.
	MeasurementPattern = `^(sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96})$`
	// HostDataPattern is the form of TEE host data: SEV-SNP HOST_DATA (32
	// bytes) or TDX MRCONFIGID (48 bytes) in lowercase hex.
	HostDataPattern = `^([0-9a-f]{64}|[0-9a-f]{96})$`
	// TDXTCBSVNPattern is the form of a TDX TEE_TCB_SVN (16 bytes).
	TDXTCBSVNPattern = `^[0-9a-f]{32}$`
	// ChipIDPattern is the form of an SEV-SNP CHIP_ID (64 bytes).
	ChipIDPattern = `^[0-9a-f]{128}$`
	// ImageDigestPattern is the form of an image digest a policy allows.
	ImageDigestPattern = `^sha256:[0-9a-f]{64}$`
	// ReasonPattern is the form of a reason code.
	ReasonPattern = `^[A-Z]+(_[A-Z]+)*$`
)

var durationRE = regexp.MustCompile(DurationPattern)

// ValidatePlacementPolicySpec checks a policy spec against the same rules as
// the CRD, for specs that did not pass through the API server. Unset
// defaulted fields are accepted.
func ValidatePlacementPolicySpec(spec *PlacementPolicySpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.Confinement {
	case "", ConfinementPool, ConfinementAny:
	default:
		errs = append(errs, field.NotSupported(path.Child("confinement"), spec.Confinement,
			[]Confinement{ConfinementPool, ConfinementAny}))
	}
	errs = append(errs, validateEvidencePolicy(&spec.Evidence, path.Child("evidence"))...)
	if s := spec.GPUSharing; s != nil {
		errs = append(errs, validateGPUSharing(s, path.Child("gpuSharing"))...)
	}
	if cc := spec.ConfidentialComputing; cc != nil {
		errs = append(errs, validateConfidentialComputing(cc, path.Child("confidentialComputing"))...)
	}
	if d := spec.Devices; d != nil {
		errs = append(errs, validateDevicePolicy(d, path.Child("devices"))...)
	}
	return errs
}

func validateDevicePolicy(d *DevicePolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateNames(path.Child("deviceClasses"), d.DeviceClasses, 64, 253)...)
	errs = append(errs, validateNames(path.Child("opaqueConfigDrivers"), d.OpaqueConfigDrivers, 16, 63)...)
	switch d.TaintEffect {
	case "", DeviceTaintNoSchedule, DeviceTaintNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("taintEffect"), d.TaintEffect, []DeviceTaintEffect{DeviceTaintNoSchedule, DeviceTaintNoExecute}))
	}
	if m := d.MaxDevicesPerRequest; m != nil && *m < 1 {
		errs = append(errs, field.Invalid(path.Child("maxDevicesPerRequest"), *m, "must be at least 1"))
	}
	return errs
}

// validateNames checks a set of names: at most maxItems, none empty,
// longer than maxLen or listed twice.
func validateNames(path *field.Path, names []string, maxItems, maxLen int) field.ErrorList {
	var errs field.ErrorList
	if len(names) > maxItems {
		errs = append(errs, field.TooMany(path, len(names), maxItems))
	}
	for i, n := range names {
		switch {
		case n == "" || len(n) > maxLen:
			errs = append(errs, field.Invalid(path.Index(i), n, fmt.Sprintf("must be 1 to %d characters", maxLen)))
		case slices.Contains(names[:i], n):
			errs = append(errs, field.Duplicate(path.Index(i), n))
		}
	}
	return errs
}

func validateEvidencePolicy(e *EvidencePolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	sources := path.Child("acceptedSources")
	switch {
	case len(e.AcceptedSources) == 0:
		errs = append(errs, field.Required(sources, "at least one evidence source must be accepted"))
	case len(e.AcceptedSources) > 3:
		errs = append(errs, field.TooMany(sources, len(e.AcceptedSources), 3))
	}
	errs = append(errs, validateSet(sources, e.AcceptedSources,
		[]EvidenceSource{SourceAttested, SourceNFD, SourceMock})...)
	if slices.Contains(e.AcceptedSources, SourceMock) {
		errs = append(errs, field.Invalid(sources, e.AcceptedSources,
			"mock cannot be listed: the evaluator's profile decides about mock evidence (lab accepts it, production never does)"))
	}
	errs = append(errs, validateDuration(e.MaxAge, path.Child("maxAge"))...)
	return errs
}

func validateGPUSharing(s *GPUSharingPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSet(path.Child("allowedModes"), s.AllowedModes, GPUSharingModes)...)
	errs = append(errs, validateSet(path.Child("forbiddenModes"), s.ForbiddenModes, GPUSharingModes)...)
	for _, m := range s.AllowedModes {
		if slices.Contains(s.ForbiddenModes, m) {
			errs = append(errs, field.Invalid(path, m, "a sharing mode cannot be both allowed and forbidden"))
		}
	}
	return errs
}

func validateConfidentialComputing(cc *ConfidentialComputingPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSet(path.Child("teeTypes"), cc.TEETypes, TEETypes)...)
	if cc.GPUCCMode != "" && !slices.Contains(GPUCCModes, cc.GPUCCMode) {
		errs = append(errs, field.NotSupported(path.Child("gpuCCMode"), cc.GPUCCMode, GPUCCModes))
	}
	measurements := path.Child("allowedMeasurements")
	if len(cc.AllowedMeasurements) > 256 {
		errs = append(errs, field.TooMany(measurements, len(cc.AllowedMeasurements), 256))
	}
	for i, m := range cc.AllowedMeasurements {
		errs = append(errs, ValidateMeasurement(m, measurements.Index(i))...)
		if slices.Index(cc.AllowedMeasurements, m) < i {
			errs = append(errs, field.Duplicate(measurements.Index(i), m))
		}
	}
	refs := path.Child("referenceValues")
	if len(cc.ReferenceValues) > 256 {
		errs = append(errs, field.TooMany(refs, len(cc.ReferenceValues), 256))
	}
	for i, r := range cc.ReferenceValues {
		errs = append(errs, ValidateMeasurement(r.Measurement, refs.Index(i).Child("measurement"))...)
		if r.HostData != "" && !isLowerHex(r.HostData, 64, 96) {
			errs = append(errs, field.Invalid(refs.Index(i).Child("hostData"), r.HostData, "must be 64 or 96 lowercase hex digits"))
		}
		if slices.IndexFunc(cc.ReferenceValues[:i], func(o MeasurementReference) bool {
			return o.Measurement == r.Measurement && o.HostData == r.HostData
		}) >= 0 {
			errs = append(errs, field.Duplicate(refs.Index(i), string(r.Measurement)+" "+r.HostData))
		}
	}
	digests := path.Child("allowedImageDigests")
	if len(cc.AllowedImageDigests) > 1024 {
		errs = append(errs, field.TooMany(digests, len(cc.AllowedImageDigests), 1024))
	}
	for i, d := range cc.AllowedImageDigests {
		if !IsImageDigest(d) {
			errs = append(errs, field.Invalid(digests.Index(i), d, "must be sha256:<64 lowercase hex>"))
		}
		if slices.Index(cc.AllowedImageDigests, d) < i {
			errs = append(errs, field.Duplicate(digests.Index(i), d))
		}
	}
	if cc.MinTDXTCBSVN != "" && !isLowerHex(cc.MinTDXTCBSVN, 32) {
		errs = append(errs, field.Invalid(path.Child("minTDXTCBSVN"), cc.MinTDXTCBSVN, "must be 32 lowercase hex digits"))
	}
	if cc.MinSNPTCB != nil {
		errs = append(errs, validateSNPTCB(cc.MinSNPTCB, path.Child("minSNPTCB"))...)
	}
	if cc.MaxAttestationAge != nil && !cc.RequireAttestation {
		errs = append(errs, field.Invalid(path.Child("maxAttestationAge"), cc.MaxAttestationAge.Duration.String(),
			"maxAttestationAge needs requireAttestation: true"))
	}
	errs = append(errs, validateDuration(cc.MaxAttestationAge, path.Child("maxAttestationAge"))...)
	return errs
}

// IsImageDigest reports whether d matches ImageDigestPattern, checked by
// hand as IsMeasurement is; a test holds the two equal.
func IsImageDigest(d string) bool {
	return len(d) == len("sha256:")+64 && d[:7] == "sha256:" && isLowerHex(d[7:], 64)
}

// ValidateMeasurement checks the form of one launch measurement.
func ValidateMeasurement(m Measurement, path *field.Path) field.ErrorList {
	if IsMeasurement(m) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, m, "must be sha256:<64 lowercase hex> or sha384:<96 lowercase hex>")}
}

// IsMeasurement reports whether m matches MeasurementPattern. It checks
// by hand what the expression says, because evidence of thousands of nodes
// is validated per request; a test holds the two equal.
func IsMeasurement(m Measurement) bool {
	var digest string
	switch {
	case len(m) == len("sha256:")+64 && m[:7] == "sha256:":
		digest = string(m[7:])
	case len(m) == len("sha384:")+96 && m[:7] == "sha384:":
		digest = string(m[7:])
	default:
		return false
	}
	for i := 0; i < len(digest); i++ {
		if c := digest[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// validateDuration checks a duration that was decoded outside the API
// server, where its text is gone: it must be positive enough and must be
// one that DurationPattern can express.
func validateDuration(d *metav1.Duration, path *field.Path) field.ErrorList {
	if d == nil {
		return nil
	}
	if d.Duration < MinDuration {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), fmt.Sprintf("must be at least %s", MinDuration))}
	}
	if !durationRE.MatchString(d.Duration.String()) {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), "must match "+DurationPattern)}
	}
	return nil
}

// ValidateDurationString checks the text of a duration as the CRD does.
func ValidateDurationString(s string, path *field.Path) field.ErrorList {
	if !durationRE.MatchString(s) {
		return field.ErrorList{field.Invalid(path, s, "must be a duration such as 90s, 10m or 1h30m (pattern "+DurationPattern+")")}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, err.Error())}
	}
	if d < MinDuration {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("must be at least %s", MinDuration))}
	}
	return nil
}

// validateSet checks that a list holds only supported values, each once.
func validateSet[T ~string](path *field.Path, values, supported []T) field.ErrorList {
	var errs field.ErrorList
	for i, v := range values {
		if !slices.Contains(supported, v) {
			errs = append(errs, field.NotSupported(path.Index(i), v, supported))
		} else if slices.Index(values, v) < i {
			errs = append(errs, field.Duplicate(path.Index(i), v))
		}
	}
	return errs
}
