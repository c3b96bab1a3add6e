package teetaint

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

func TestDesiredTaints(t *testing.T) {
	tee := func(v string) corev1.Taint {
		return corev1.Taint{Key: guard.TaintTEE, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	pool := corev1.Taint{Key: guard.TaintTenantPool, Value: "acme", Effect: corev1.TaintEffectNoSchedule}
	adminOwn := corev1.Taint{Key: guard.TaintTEE, Value: "x", Effect: corev1.TaintEffectNoExecute}
	state := func(src v1alpha1.EvidenceSource, uid string, typ v1alpha1.TEEType) *v1alpha1.NodeSecurityState {
		s := &v1alpha1.NodeSecurityState{Spec: v1alpha1.NodeSecurityStateSpec{Source: src, NodeUID: "uid-1"}}
		s.Spec.NodeUID = types.UID(uid)
		if typ != "" {
			s.Spec.TEE = &v1alpha1.TEEFacts{Type: typ}
		}
		return s
	}
	for name, c := range map[string]struct {
		taints  []corev1.Taint
		nss     *v1alpha1.NodeSecurityState
		want    []corev1.Taint
		changed bool
	}{
		"attested SEV-SNP: tainted":                {[]corev1.Taint{pool}, state(v1alpha1.SourceAttested, "uid-1", v1alpha1.TEESEVSNP), []corev1.Taint{pool, tee("SEV-SNP")}, true},
		"already tainted":                          {[]corev1.Taint{tee("TDX")}, state(v1alpha1.SourceAttested, "uid-1", v1alpha1.TEETDX), []corev1.Taint{tee("TDX")}, false},
		"type changed: value follows":              {[]corev1.Taint{tee("TDX")}, state(v1alpha1.SourceAttested, "uid-1", v1alpha1.TEESEVSNP), []corev1.Taint{tee("SEV-SNP")}, true},
		"duplicates collapse":                      {[]corev1.Taint{tee("SEV-SNP"), tee("SEV-SNP"), tee("SGX")}, state(v1alpha1.SourceAttested, "uid-1", v1alpha1.TEESEVSNP), []corev1.Taint{tee("SEV-SNP")}, true},
		"no evidence: untainted":                   {[]corev1.Taint{pool, tee("SEV-SNP")}, nil, []corev1.Taint{pool}, true},
		"nfd evidence is not attested":             {nil, state(v1alpha1.SourceNFD, "uid-1", v1alpha1.TEESEVSNP), nil, false},
		"evidence about another node UID":          {[]corev1.Taint{tee("SEV-SNP")}, state(v1alpha1.SourceAttested, "uid-2", v1alpha1.TEESEVSNP), []corev1.Taint{}, true},
		"attested without a TEE":                   {nil, state(v1alpha1.SourceAttested, "uid-1", ""), nil, false},
		"an administrator's NoExecute taint stays": {[]corev1.Taint{adminOwn}, nil, []corev1.Taint{adminOwn}, false},
	} {
		t.Run(name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}, Spec: corev1.NodeSpec{Taints: c.taints}}
			got, changed := DesiredTaints(node, c.nss)
			if changed != c.changed {
				t.Errorf("changed %v, want %v", changed, c.changed)
			}
			if changed {
				if diff := cmp.Diff(c.want, got); diff != "" {
					t.Errorf("taints (-want +got):\n%s", diff)
				}
			}
		})
	}
}
