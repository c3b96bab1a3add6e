package lab

import (
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestMerge(t *testing.T) {
	got := Merge(
		map[string]any{"a": map[string]any{"x": 1, "y": 2}, "b": 1},
		map[string]any{"a": map[string]any{"y": 3, "z": 4}, "c": []any{1}},
	)
	want := map[string]any{"a": map[string]any{"x": 1, "y": 3, "z": 4}, "b": 1, "c": []any{1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
}

func TestDenials(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	webhook := apierrors.NewForbidden(pods, "p", errors.New(`admission webhook "pods.webhook.guard.xila.us" denied the request: rule protected-privileged (PRIVILEGED_CONTAINER)`))
	rbac := apierrors.NewForbidden(pods, "p", errors.New(`User "alice" cannot create resource "pods"`))
	for _, tc := range []struct {
		name             string
		err              error
		admission, authz bool
	}{
		{"webhook", webhook, true, false},
		{"rbac", rbac, false, true},
		{"none", nil, false, false},
		{"other", errors.New("connection refused"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := AdmissionDenial(tc.err); got != tc.admission {
				t.Errorf("AdmissionDenial = %v, want %v", got, tc.admission)
			}
			if got := RBACDenial(tc.err); got != tc.authz {
				t.Errorf("RBACDenial = %v, want %v", got, tc.authz)
			}
		})
	}
	// A refusal by the webhook where RBAC should refuse is not the
	// matrix's answer: RBAC must hold on its own.
	if (Access{WantAllowed: false, Err: webhook}).OK() {
		t.Error("an admission refusal passes for an RBAC refusal")
	}
	if !(Access{WantAllowed: false, Err: rbac}).OK() || !(Access{WantAllowed: true, Allowed: true}).OK() {
		t.Error("expected outcomes are not OK")
	}
}
