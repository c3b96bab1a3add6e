//go:build integration

package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

var attester = principal{"system:serviceaccount:xila-guard-system:xila-guard-attest", []string{"system:serviceaccounts", "system:authenticated"}}

// guardClient is a client of the guard kinds acting as p.
func (p principal) guardClient(t *testing.T) client.Client {
	t.Helper()
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	k, err := client.New(c, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// grantEvidenceWrites lets every principal of the tests write
// NodeSecurityStates: only the policy refuses.
func grantEvidenceWrites(t *testing.T) {
	t.Helper()
	grantGroups(t, "trust-test-evidence-writer", false,
		[]rbacv1.PolicyRule{{APIGroups: []string{"guard.xila.us"}, Resources: []string{"nodesecuritystates"}, Verbs: []string{"get", "create", "update", "patch", "delete"}}},
		"system:nodes", "system:serviceaccounts", "node-operators")
}

func evidenceOf(name string, source v1alpha1.EvidenceSource) *v1alpha1.NodeSecurityState {
	return &v1alpha1.NodeSecurityState{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NodeSecurityStateSpec{
			NodeUID: types.UID("uid-" + name), Incarnation: "boot-1", ObservedAt: metav1.NewTime(time.Now().UTC().Truncate(time.Second)),
			Source: source, Complete: true,
			TEE: &v1alpha1.TEEFacts{Type: v1alpha1.TEESEVSNP},
		},
	}
}

// TestIntegrationAttestedEvidence shows that only the attestation
// controller's account writes attested evidence, from every other seat
// that may write NodeSecurityStates at all.
func TestIntegrationAttestedEvidence(t *testing.T) {
	grantNodeWrites(t)
	grantEvidenceWrites(t)
	applyTrustPolicies(t, trustValues(t), poolKey)
	t.Cleanup(func() { removeTrustPolicies(t) })
	const refused = "ATTESTED_EVIDENCE_NOT_ALLOWED"
	// The API server loads the policies in the background: wait until this
	// one refuses.
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = taintKeeper.guardClient(t).Create(ctx, evidenceOf("attested-probe", v1alpha1.SourceAttested))
		if last == nil {
			_ = env.Client.Delete(ctx, evidenceOf("attested-probe", v1alpha1.SourceAttested))
		}
		return last != nil && strings.Contains(last.Error(), refused), nil
	})
	if err != nil {
		t.Fatalf("the attested evidence policy does not take effect: %v (last: %v)", err, last)
	}
	// existing makes the node's evidence, of source, as its rightful
	// writer would.
	existing := func(source v1alpha1.EvidenceSource) func(t *testing.T, name string) {
		return func(t *testing.T, name string) {
			t.Helper()
			_ = env.Client.Delete(t.Context(), &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name}})
			writer := taintKeeper
			if source == v1alpha1.SourceAttested {
				writer = attester
			}
			if err := writer.guardClient(t).Create(t.Context(), evidenceOf(name, source)); err != nil {
				t.Fatalf("%s creating %s evidence: %v", writer.user, source, err)
			}
		}
	}
	none := func(t *testing.T, name string) {
		_ = env.Client.Delete(t.Context(), &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	create := func(source v1alpha1.EvidenceSource) func(t *testing.T, c client.Client, name string) error {
		return func(t *testing.T, c client.Client, name string) error {
			return c.Create(t.Context(), evidenceOf(name, source))
		}
	}
	update := func(change func(*v1alpha1.NodeSecurityState)) func(t *testing.T, c client.Client, name string) error {
		return func(t *testing.T, c client.Client, name string) error {
			nss := &v1alpha1.NodeSecurityState{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, nss); err != nil {
				return err
			}
			change(nss)
			return c.Update(t.Context(), nss)
		}
	}
	measure := update(func(n *v1alpha1.NodeSecurityState) {
		n.Spec.TEE.Measurement = v1alpha1.Measurement("sha384:" + strings.Repeat("ab", 48))
	})
	toNFD := update(func(n *v1alpha1.NodeSecurityState) { n.Spec.Source = v1alpha1.SourceNFD })
	toAttested := update(func(n *v1alpha1.NodeSecurityState) { n.Spec.Source = v1alpha1.SourceAttested })
	relabel := update(func(n *v1alpha1.NodeSecurityState) { n.Labels = map[string]string{poolKey: "acme"} })
	remove := func(t *testing.T, c client.Client, name string) error {
		return c.Delete(t.Context(), &v1alpha1.NodeSecurityState{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	cases := []struct {
		name  string
		who   principal
		setup func(*testing.T, string)
		do    func(*testing.T, client.Client, string) error
		want  string
	}{
		{"attestation controller creates attested evidence", attester, none, create(v1alpha1.SourceAttested), ""},
		{"attestation controller changes attested evidence", attester, existing(v1alpha1.SourceAttested), measure, ""},
		{"attestation controller takes over nfd evidence", attester, existing(v1alpha1.SourceNFD), toAttested, ""},
		{"observe controller creates attested evidence", taintKeeper, none, create(v1alpha1.SourceAttested), refused},
		{"observe controller changes attested evidence", taintKeeper, existing(v1alpha1.SourceAttested), measure, refused},
		{"observe controller turns attested evidence into nfd", taintKeeper, existing(v1alpha1.SourceAttested), toNFD, refused},
		{"observe controller relabels attested evidence", taintKeeper, existing(v1alpha1.SourceAttested), relabel, refused},
		{"observe controller turns nfd evidence into attested", taintKeeper, existing(v1alpha1.SourceNFD), toAttested, refused},
		{"node creates its attested evidence", nodeUser, none, create(v1alpha1.SourceAttested), refused},
		{"node changes its attested evidence", nodeUser, existing(v1alpha1.SourceAttested), measure, refused},
		{"operator creates attested evidence", operator, none, create(v1alpha1.SourceAttested), refused},
		{"administrator creates attested evidence", admin, none, create(v1alpha1.SourceAttested), refused},
		{"administrator changes attested evidence", admin, existing(v1alpha1.SourceAttested), measure, refused},
		{"account named like the attestation controller in group system:nodes", principal{attester.user + "x", []string{"system:nodes"}}, none, create(v1alpha1.SourceAttested), refused},
		{"observe controller creates nfd evidence", taintKeeper, none, create(v1alpha1.SourceNFD), ""},
		{"observe controller changes nfd evidence", taintKeeper, existing(v1alpha1.SourceNFD), measure, ""},
		{"administrator deletes attested evidence (the node is left with none)", admin, existing(v1alpha1.SourceAttested), remove, ""},
	}
	for i, tc := range cases {
		t.Run("G-ATTESTED-EVIDENCE "+tc.name, func(t *testing.T) {
			name := "attested-" + string(rune('a'+i))
			tc.setup(t, name)
			err := tc.do(t, tc.who.guardClient(t), name)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: refused: %v", tc.who.user, err)
			case tc.want != "" && err == nil:
				t.Errorf("%s: allowed, want refused with %s", tc.who.user, tc.want)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: refused with %v, want %s", tc.who.user, err, tc.want)
			}
		})
	}
}

// removeTrustPolicies deletes the chart's admission policies and their
// bindings, for the tests that expect to find none.
func removeTrustPolicies(t *testing.T) {
	ctx := context.Background()
	policies := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	for _, l := range []client.ObjectList{policies, bindings} {
		if err := env.Client.List(ctx, l); err != nil {
			t.Errorf("listing the admission policies: %v", err)
			return
		}
	}
	var objs []client.Object
	for i := range policies.Items {
		objs = append(objs, &policies.Items[i])
	}
	for i := range bindings.Items {
		objs = append(objs, &bindings.Items[i])
	}
	for _, o := range objs {
		if strings.HasPrefix(o.GetName(), "xila-guard-") {
			if err := env.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", o.GetName(), err)
			}
		}
	}
	// The API server drops them in the background: wait until a pool
	// label without its taint is admitted again.
	probe := nodeObject("policies-gone", map[string]string{poolKey: "acme"}, "")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return env.Client.Create(ctx, probe.DeepCopy()) == nil, nil
	})
	if err != nil {
		t.Errorf("the admission policies still apply after their deletion: %v", err)
	}
	_ = env.Client.Delete(ctx, probe)
}
