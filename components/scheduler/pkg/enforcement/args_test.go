package enforcement

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

func TestResolveSettings(t *testing.T) {
	cases := []struct {
		name    string
		args    Args
		env     map[string]string
		want    settings
		wantErr string
	}{{
		name: "defaults",
		want: settings{profile: guard.ProfileProduction, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool, challengeTimeout: DefaultChallengeTimeout},
	}, {
		name: "args",
		args: Args{AcceptMock: ptr.To(true), AnswerReuse: &metav1.Duration{}, PoolLabel: "example.com/pool"},
		want: settings{profile: guard.ProfileLab, poolLabel: "example.com/pool", challengeTimeout: DefaultChallengeTimeout},
	}, {
		name: "environment wins over args",
		args: Args{AcceptMock: ptr.To(true), PoolLabel: "example.com/pool"},
		env:  map[string]string{guard.EnvEnforceAcceptMock: "false", guard.EnvPoolLabel: "pools.example.com/name"},
		want: settings{profile: guard.ProfileProduction, answerReuse: DefaultAnswerReuse, poolLabel: "pools.example.com/name", challengeTimeout: DefaultChallengeTimeout},
	}, {
		name: "lab from the environment",
		env:  map[string]string{guard.EnvEnforceAcceptMock: "true"},
		want: settings{profile: guard.ProfileLab, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool, challengeTimeout: DefaultChallengeTimeout},
	}, {
		name: "empty variables are unset",
		args: Args{AcceptMock: ptr.To(true)},
		env:  map[string]string{guard.EnvEnforceAcceptMock: "", guard.EnvPoolLabel: ""},
		want: settings{profile: guard.ProfileLab, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool, challengeTimeout: DefaultChallengeTimeout},
	}, {
		name: "bad mock flag", env: map[string]string{guard.EnvEnforceAcceptMock: "yes please"}, wantErr: "XILAGUARD_ENFORCE_ACCEPT_MOCK",
	}, {
		name: "reuse too long", args: Args{AnswerReuse: &metav1.Duration{Duration: time.Minute}}, wantErr: "answerReuse",
	}, {
		name: "negative reuse", args: Args{AnswerReuse: &metav1.Duration{Duration: -time.Second}}, wantErr: "answerReuse",
	}, {
		name: "bad pool label", args: Args{PoolLabel: "not a label"}, wantErr: "pool label",
	}, {
		name: "bad pool label from the environment", env: map[string]string{guard.EnvPoolLabel: "a/b/c"}, wantErr: "pool label",
	}, {
		name: "attestation controller",
		args: Args{AttestationURL: "https://xila-guard-attest.xila-guard-system.svc:8443", ChallengeTimeout: &metav1.Duration{Duration: 300 * time.Millisecond}},
		want: settings{profile: guard.ProfileProduction, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool,
			attestationURL: "https://xila-guard-attest.xila-guard-system.svc:8443", challengeTimeout: 300 * time.Millisecond},
	}, {
		name: "attestation URL without a scheme", args: Args{AttestationURL: "xila-guard-attest:8443"}, wantErr: "attestationURL",
	}, {
		name: "attestation URL of another scheme", args: Args{AttestationURL: "ftp://x"}, wantErr: "attestationURL",
	}, {
		name: "attestation URL with a query", args: Args{AttestationURL: "http://x/?q=1"}, wantErr: "attestationURL",
	}, {
		name: "zero challenge timeout", args: Args{ChallengeTimeout: &metav1.Duration{}}, wantErr: "challengeTimeout",
	}, {
		name: "challenge timeout too long", args: Args{ChallengeTimeout: &metav1.Duration{Duration: time.Minute}}, wantErr: "challengeTimeout",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveSettings(tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("settings = %+v, want %+v", got, tc.want)
			}
		})
	}
}
