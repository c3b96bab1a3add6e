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
		want: settings{coreURL: guard.DefaultCoreURL, profile: guard.ProfileProduction, evalTimeout: 800 * time.Millisecond, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
	}, {
		name: "args",
		args: Args{CoreURL: "https://core:8443", AcceptMock: ptr.To(true), EvalTimeout: &metav1.Duration{Duration: 2 * time.Second},
			AnswerReuse: &metav1.Duration{}, PoolLabel: "example.com/pool", EvaluatePerNode: true},
		want: settings{coreURL: "https://core:8443", profile: guard.ProfileLab, evalTimeout: 2 * time.Second, poolLabel: "example.com/pool", evaluatePerNode: true},
	}, {
		name: "environment wins over args",
		args: Args{CoreURL: "https://core:8443", AcceptMock: ptr.To(true), EvalTimeout: &metav1.Duration{Duration: 2 * time.Second}},
		env: map[string]string{guard.EnvCoreURL: "http://10.0.0.1:8080", guard.EnvEnforceAcceptMock: "false",
			guard.EnvEvalTimeoutMS: "150", guard.EnvPoolLabel: "pools.example.com/name"},
		want: settings{coreURL: "http://10.0.0.1:8080", profile: guard.ProfileProduction, evalTimeout: 150 * time.Millisecond,
			answerReuse: DefaultAnswerReuse, poolLabel: "pools.example.com/name"},
	}, {
		name: "lab from the environment",
		env:  map[string]string{guard.EnvEnforceAcceptMock: "true"},
		want: settings{coreURL: guard.DefaultCoreURL, profile: guard.ProfileLab, evalTimeout: 800 * time.Millisecond, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
	}, {
		name: "empty variables are unset",
		env:  map[string]string{guard.EnvCoreURL: "", guard.EnvEvalTimeoutMS: ""},
		want: settings{coreURL: guard.DefaultCoreURL, profile: guard.ProfileProduction, evalTimeout: 800 * time.Millisecond, answerReuse: DefaultAnswerReuse, poolLabel: guard.LabelTenantPool},
	}, {
		name: "bad mock flag", env: map[string]string{guard.EnvEnforceAcceptMock: "yes please"}, wantErr: "XILAGUARD_ENFORCE_ACCEPT_MOCK",
	}, {
		name: "bad timeout", env: map[string]string{guard.EnvEvalTimeoutMS: "1s"}, wantErr: "XILAGUARD_EVAL_TIMEOUT_MS",
	}, {
		name: "zero timeout", env: map[string]string{guard.EnvEvalTimeoutMS: "0"}, wantErr: "want more than 0",
	}, {
		name: "timeout too long", args: Args{EvalTimeout: &metav1.Duration{Duration: time.Minute}}, wantErr: "at most 10s",
	}, {
		name: "reuse too long", args: Args{AnswerReuse: &metav1.Duration{Duration: time.Minute}}, wantErr: "answerReuse",
	}, {
		name: "bad URL", env: map[string]string{guard.EnvCoreURL: "core:8080"}, wantErr: "evaluator URL",
	}, {
		name: "bad pool label", args: Args{PoolLabel: "not a label"}, wantErr: "pool label",
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
