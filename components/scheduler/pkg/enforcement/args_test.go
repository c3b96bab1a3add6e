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
		want: settings{profile: guard.ProfileProduction, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
	}, {
		name: "args",
		args: Args{AcceptMock: ptr.To(true), AnswerReuse: &metav1.Duration{}, PoolLabel: "example.com/pool"},
		want: settings{profile: guard.ProfileLab, poolLabel: "example.com/pool"},
	}, {
		name: "environment wins over args",
		args: Args{AcceptMock: ptr.To(true), PoolLabel: "example.com/pool"},
		env:  map[string]string{guard.EnvEnforceAcceptMock: "false", guard.EnvPoolLabel: "pools.example.com/name"},
		want: settings{profile: guard.ProfileProduction, answerReuse: DefaultAnswerReuse, poolLabel: "pools.example.com/name"},
	}, {
		name: "lab from the environment",
		env:  map[string]string{guard.EnvEnforceAcceptMock: "true"},
		want: settings{profile: guard.ProfileLab, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
	}, {
		name: "empty variables are unset",
		args: Args{AcceptMock: ptr.To(true)},
		env:  map[string]string{guard.EnvEnforceAcceptMock: "", guard.EnvPoolLabel: ""},
		want: settings{profile: guard.ProfileLab, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
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
