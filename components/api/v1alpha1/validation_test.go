package v1alpha1

import (
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func validPolicy() *PlacementPolicySpec {
	return &PlacementPolicySpec{
		Confinement: ConfinementPool,
		Evidence:    EvidencePolicy{AcceptedSources: []EvidenceSource{SourceNFD}, MaxAge: &metav1.Duration{Duration: time.Minute}},
		GPUSharing:  &GPUSharingPolicy{AllowedModes: []GPUSharingMode{SharingMIG}, ForbiddenModes: []GPUSharingMode{SharingMPS}},
		ConfidentialComputing: &ConfidentialComputingPolicy{
			TEETypes: []TEEType{TEETDX}, GPUCCMode: CCModeOn,
			AllowedMeasurements: []Measurement{Measurement("sha256:" + strings.Repeat("0", 64))},
			RequireAttestation:  true, MaxAttestationAge: &metav1.Duration{Duration: time.Hour},
		},
	}
}

func validState() *NodeSecurityStateSpec {
	return &NodeSecurityStateSpec{
		NodeUID: "uid", Incarnation: "inc", ObservedAt: metav1.Now(), Source: SourceMock, Complete: true,
		Devices: []GPUDevice{{ID: "0", SharingMode: SharingMIG, MIGProfile: "1g.10gb", CCMode: CCModeOff}, {ID: "1"}},
		TEE: &TEEFacts{Type: TEESGX, Measurement: Measurement("sha384:" + strings.Repeat("f", 96)),
			Attestation: &Attestation{Verdict: AttestationFailed, VerifiedAt: metav1.Now()}},
	}
}

// errorsOf renders errors as "field: type" for comparison.
func errorsOf(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+string(e.Type))
	}
	return out
}

func TestValidatePlacementPolicySpec(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*PlacementPolicySpec)
		want   []string
	}{
		{name: "valid", mutate: func(*PlacementPolicySpec) {}},
		{name: "defaults left unset", mutate: func(p *PlacementPolicySpec) {
			p.Confinement, p.Evidence.MaxAge, p.GPUSharing, p.ConfidentialComputing = "", nil, nil, nil
		}},
		{name: "unknown confinement", mutate: func(p *PlacementPolicySpec) { p.Confinement = "Anywhere" },
			want: []string{"spec.confinement: FieldValueNotSupported"}},
		{name: "no source", mutate: func(p *PlacementPolicySpec) { p.Evidence.AcceptedSources = nil },
			want: []string{"spec.evidence.acceptedSources: FieldValueRequired"}},
		{name: "mock and an unknown source", mutate: func(p *PlacementPolicySpec) {
			p.Evidence.AcceptedSources = []EvidenceSource{SourceMock, "rumour"}
		}, want: []string{"spec.evidence.acceptedSources[1]: FieldValueNotSupported", "spec.evidence.acceptedSources: FieldValueInvalid"}},
		{name: "too many sources", mutate: func(p *PlacementPolicySpec) {
			p.Evidence.AcceptedSources = []EvidenceSource{SourceNFD, SourceNFD, SourceAttested, SourceAttested}
		}, want: []string{"spec.evidence.acceptedSources: FieldValueTooMany", "spec.evidence.acceptedSources[1]: FieldValueDuplicate",
			"spec.evidence.acceptedSources[3]: FieldValueDuplicate"}},
		{name: "duration too short", mutate: func(p *PlacementPolicySpec) { p.Evidence.MaxAge.Duration = time.Millisecond },
			want: []string{"spec.evidence.maxAge: FieldValueInvalid"}},
		{name: "duration too long to write", mutate: func(p *PlacementPolicySpec) { p.Evidence.MaxAge.Duration = 100000 * time.Hour },
			want: []string{"spec.evidence.maxAge: FieldValueInvalid"}},
		{name: "sharing mode allowed and forbidden", mutate: func(p *PlacementPolicySpec) {
			p.GPUSharing.ForbiddenModes = []GPUSharingMode{SharingMIG, "Shared"}
		}, want: []string{"spec.gpuSharing.forbiddenModes[1]: FieldValueNotSupported", "spec.gpuSharing: FieldValueInvalid"}},
		{name: "confidential computing", mutate: func(p *PlacementPolicySpec) {
			cc := p.ConfidentialComputing
			cc.TEETypes = []TEEType{"Enclave9"}
			cc.GPUCCMode = "Sometimes"
			cc.AllowedMeasurements = append(cc.AllowedMeasurements, cc.AllowedMeasurements[0], "sha256:ABC")
			cc.RequireAttestation = false
		}, want: []string{
			"spec.confidentialComputing.teeTypes[0]: FieldValueNotSupported",
			"spec.confidentialComputing.gpuCCMode: FieldValueNotSupported",
			"spec.confidentialComputing.allowedMeasurements[1]: FieldValueDuplicate",
			"spec.confidentialComputing.allowedMeasurements[2]: FieldValueInvalid",
			"spec.confidentialComputing.maxAttestationAge: FieldValueInvalid",
		}},
		{name: "reference values, minimum TCBs and image digests", mutate: func(p *PlacementPolicySpec) {
			cc := p.ConfidentialComputing
			m := cc.AllowedMeasurements[0]
			cc.ReferenceValues = []MeasurementReference{{Measurement: m}, {Measurement: m, HostData: strings.Repeat("a", 64)},
				{Measurement: m}, {Measurement: "md5:00", HostData: "AB"}}
			cc.MinSNPTCB = &SNPTCB{Microcode: 256}
			cc.MinTDXTCBSVN = strings.Repeat("0", 31)
			digest := "sha256:" + strings.Repeat("b", 64)
			cc.AllowedImageDigests = []string{digest, digest, "sha256:" + strings.Repeat("B", 64)}
		}, want: []string{
			"spec.confidentialComputing.referenceValues[2]: FieldValueDuplicate",
			"spec.confidentialComputing.referenceValues[3].measurement: FieldValueInvalid",
			"spec.confidentialComputing.referenceValues[3].hostData: FieldValueInvalid",
			"spec.confidentialComputing.allowedImageDigests[1]: FieldValueDuplicate",
			"spec.confidentialComputing.allowedImageDigests[2]: FieldValueInvalid",
			"spec.confidentialComputing.minTDXTCBSVN: FieldValueInvalid",
			"spec.confidentialComputing.minSNPTCB.microcode: FieldValueInvalid",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validPolicy()
			tc.mutate(p)
			got := errorsOf(ValidatePlacementPolicySpec(p, field.NewPath("spec")))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestValidateNodeSecurityStateSpec(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*NodeSecurityStateSpec)
		want   []string
	}{
		{name: "valid", mutate: func(*NodeSecurityStateSpec) {}},
		{name: "identity and time", mutate: func(s *NodeSecurityStateSpec) {
			s.NodeUID, s.Incarnation, s.ObservedAt = "", strings.Repeat("x", 129), metav1.Time{}
		}, want: []string{"spec.nodeUID: FieldValueRequired", "spec.incarnation: FieldValueTooLong", "spec.observedAt: FieldValueRequired"}},
		{name: "unknown source", mutate: func(s *NodeSecurityStateSpec) { s.Source = "" },
			want: []string{"spec.source: FieldValueNotSupported"}},
		{name: "devices", mutate: func(s *NodeSecurityStateSpec) {
			s.Devices = append(s.Devices, GPUDevice{ID: "0", SharingMode: "Shared", MIGProfile: "1g.10gb", CCMode: "Maybe"}, GPUDevice{})
		}, want: []string{
			"spec.devices[2].sharingMode: FieldValueNotSupported", "spec.devices[2].migProfile: FieldValueInvalid",
			"spec.devices[2].ccMode: FieldValueNotSupported", "spec.devices[2].id: FieldValueDuplicate",
			"spec.devices[3].id: FieldValueRequired",
		}},
		{name: "MIG profile on a device with mig and any sharing mode", mutate: func(s *NodeSecurityStateSpec) {
			s.Devices = append(s.Devices, GPUDevice{ID: "2", MIG: true, SharingMode: SharingTimeSlicing, MIGProfile: "1g.10gb"},
				GPUDevice{ID: "3", MIG: true, MIGProfile: "1g.10gb"}, GPUDevice{ID: "4", MIG: true, SharingMode: SharingMIG})
		}},
		{name: "MIG profile without mig", mutate: func(s *NodeSecurityStateSpec) {
			s.Devices = append(s.Devices, GPUDevice{ID: "2", SharingMode: SharingTimeSlicing, MIGProfile: "1g.10gb"})
		}, want: []string{"spec.devices[2].migProfile: FieldValueInvalid"}},
		{name: "too many devices", mutate: func(s *NodeSecurityStateSpec) {
			s.Devices = make([]GPUDevice, 65)
			for i := range s.Devices {
				s.Devices[i].ID = strings.Repeat("d", i+1)
			}
		}, want: []string{"spec.devices: FieldValueTooMany"}},
		{name: "TEE", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.Measurement = "", "md5:00"
			s.TEE.Attestation.Verdict, s.TEE.Attestation.VerifiedAt = "", metav1.Time{}
		}, want: []string{
			"spec.tee.type: FieldValueNotSupported", "spec.tee.measurement: FieldValueInvalid",
			"spec.tee.attestation.verdict: FieldValueNotSupported", "spec.tee.attestation.verifiedAt: FieldValueRequired",
		}},
		{name: "attested SEV-SNP facts", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.HostData, s.TEE.ChipID = TEESEVSNP, strings.Repeat("0a", 32), strings.Repeat("c3", 64)
			s.TEE.SNPTCB = &SNPTCB{BootLoader: 3, TEE: 0, SNP: 8, Microcode: 255}
			s.TEE.Attestation.Reason, s.TEE.Attestation.Message, s.TEE.Attestation.RootOfTrust = "MEASUREMENT_NOT_ALLOWED", "no", RootLab
		}},
		{name: "attested TDX facts", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.HostData, s.TEE.TDXTCBSVN = TEETDX, strings.Repeat("0a", 48), strings.Repeat("01", 16)
			s.TEE.Attestation.Verdict, s.TEE.Attestation.RootOfTrust = AttestationPassed, RootIntel
		}},
		{name: "hardware facts of another TEE", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.HostData, s.TEE.TDXTCBSVN = TEESEVSNP, strings.Repeat("0a", 48), strings.Repeat("01", 16)
			s.TEE.SNPTCB = &SNPTCB{BootLoader: 256, Microcode: -1}
		}, want: []string{"spec.tee.hostData: FieldValueInvalid", "spec.tee.snpTCB.bootLoader: FieldValueInvalid",
			"spec.tee.snpTCB.microcode: FieldValueInvalid", "spec.tee.tdxTCBSVN: FieldValueForbidden"}},
		{name: "malformed hardware facts", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Type, s.TEE.HostData, s.TEE.ChipID, s.TEE.TDXTCBSVN = TEETDX, strings.Repeat("A", 96), "00", "xyz"
			s.TEE.SNPTCB = &SNPTCB{}
		}, want: []string{"spec.tee.hostData: FieldValueInvalid", "spec.tee.snpTCB: FieldValueForbidden",
			"spec.tee.tdxTCBSVN: FieldValueInvalid", "spec.tee.chipID: FieldValueInvalid", "spec.tee.chipID: FieldValueForbidden"}},
		{name: "attestation details", mutate: func(s *NodeSecurityStateSpec) {
			s.TEE.Attestation.Verdict, s.TEE.Attestation.Reason = AttestationPassed, "QUOTE_INVALID"
			s.TEE.Attestation.Message, s.TEE.Attestation.RootOfTrust = strings.Repeat("m", 1025), "acme"
		}, want: []string{"spec.tee.attestation.reason: FieldValueForbidden", "spec.tee.attestation.message: FieldValueTooLong",
			"spec.tee.attestation.rootOfTrust: FieldValueNotSupported"}},
		{name: "reason not a code", mutate: func(s *NodeSecurityStateSpec) { s.TEE.Attestation.Reason = "quote invalid" },
			want: []string{"spec.tee.attestation.reason: FieldValueInvalid"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := validState()
			tc.mutate(s)
			got := errorsOf(ValidateNodeSecurityStateSpec(s, field.NewPath("spec")))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestValidateDurationString(t *testing.T) {
	for s, ok := range map[string]bool{
		"1s": true, "90s": true, "10m": true, "1h30m": true, "1.5h": true, "99999h": true,
		"": false, "0s": false, "999ms": false, "soon": false, "-1m": false, "100000h": false, "1h1m1s1ms1us": false,
	} {
		if got := len(ValidateDurationString(s, field.NewPath("d"))) == 0; got != ok {
			t.Errorf("ValidateDurationString(%q) valid = %v, want %v", s, got, ok)
		}
	}
}

func TestTenantBindingPool(t *testing.T) {
	s := TenantBindingSpec{TenantID: "acme"}
	if s.Pool() != "acme" {
		t.Errorf("Pool() = %q, want the tenant ID", s.Pool())
	}
	s.NodePool = "acme-gpu"
	if s.Pool() != "acme-gpu" {
		t.Errorf("Pool() = %q, want nodePool", s.Pool())
	}
}

var measurementRE = regexp.MustCompile(MeasurementPattern)

func TestIsMeasurementMatchesPattern(t *testing.T) {
	hex64, hex96 := strings.Repeat("0a", 32), strings.Repeat("f9", 48)
	for _, m := range []string{
		"sha256:" + hex64, "sha384:" + hex96, "", "sha256:", "sha256:" + hex96, "sha384:" + hex64,
		"sha256:" + strings.ToUpper(hex64), "sha512:" + hex64, "SHA256:" + hex64, "sha256:" + hex64 + "\n",
		"sha256:" + hex64[:63] + "g", " sha256:" + hex64, "sha256-" + hex64,
	} {
		if got, want := IsMeasurement(Measurement(m)), measurementRE.MatchString(m); got != want {
			t.Errorf("IsMeasurement(%q) = %v, pattern says %v", m, got, want)
		}
	}
}

func FuzzIsMeasurement(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("a", 64))
	f.Add("sha384:" + strings.Repeat("0", 96))
	f.Fuzz(func(t *testing.T, m string) {
		if got, want := IsMeasurement(Measurement(m)), measurementRE.MatchString(m); got != want {
			t.Errorf("IsMeasurement(%q) = %v, pattern says %v", m, got, want)
		}
	})
}

func TestHexAndReasonChecksMatchPatterns(t *testing.T) {
	for pattern, check := range map[string]func(string) bool{
		HostDataPattern:  func(s string) bool { return isLowerHex(s, 64, 96) },
		TDXTCBSVNPattern: func(s string) bool { return isLowerHex(s, 32) },
		ChipIDPattern:    func(s string) bool { return isLowerHex(s, 128) },
		ReasonPattern:    isReason,
	} {
		re := regexp.MustCompile(pattern)
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129} {
			for _, s := range []string{strings.Repeat("a", n), strings.Repeat("0", n), strings.Repeat("A", n), strings.Repeat("g", n),
				strings.Repeat("f", max(n-1, 0)) + "\n", strings.Repeat("A_", n), strings.Repeat("AB_", n) + "C", "_" + strings.Repeat("A", n)} {
				if got, want := check(s), re.MatchString(s); got != want {
					t.Errorf("%s: check(%q) = %v, pattern says %v", pattern, s, got, want)
				}
			}
		}
	}
}

func TestIsImageDigestMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(ImageDigestPattern)
	for _, prefix := range []string{"sha256:", "sha384:", "SHA256:", "sha256", ""} {
		for _, n := range []int{0, 63, 64, 65} {
			for _, digit := range []string{"a", "0", "A", "g"} {
				for _, suffix := range []string{"", "\n"} {
					s := prefix + strings.Repeat(digit, n) + suffix
					if got, want := IsImageDigest(s), re.MatchString(s); got != want {
						t.Errorf("IsImageDigest(%q) = %v, pattern says %v", s, got, want)
					}
				}
			}
		}
	}
}
