package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

var labChainKey = types.NamespacedName{Namespace: "xila-guard-system", Name: "xila-guard-attest-lab-chain"}

func fixtureChainSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	chain, err := labtee.ReadSecretDir(labChainDir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := chain.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: labChainKey.Namespace, Name: labChainKey.Name}, Data: data}
}

func TestLabChainRootCreatesOnceUnderLab(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	root, err := labChainRoot(context.Background(), c, labChainKey, true, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := c.Get(context.Background(), labChainKey, &s); err != nil {
		t.Fatalf("the Secret was not created: %v", err)
	}
	if !bytes.Equal(s.Data[labtee.SecretCertChain], root) || s.Immutable == nil || !*s.Immutable || s.Labels["app.kubernetes.io/component"] != LabChainComponent {
		t.Errorf("Secret %+v does not hold the returned root immutably", s.ObjectMeta)
	}
	if _, err := labtee.ParseSecretData(s.Data); err != nil {
		t.Errorf("the Secret is no chain the attester can sign with: %v", err)
	}
	again, err := labChainRoot(context.Background(), c, labChainKey, true, logr.Discard())
	if err != nil || !bytes.Equal(again, root) {
		t.Errorf("second start: a different root (%v): the chain must be made once", err)
	}
}

func TestLabChainRootProductionOnlyReads(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	root, err := labChainRoot(context.Background(), c, labChainKey, false, logr.Discard())
	if err != nil || root != nil {
		t.Fatalf("no Secret under production: root %d bytes, %v; want none and no error", len(root), err)
	}
	if err := c.Get(context.Background(), labChainKey, &corev1.Secret{}); err == nil {
		t.Error("production created a lab chain")
	}
	fixture := fixtureChainSecret(t)
	c = fake.NewClientBuilder().WithObjects(fixture).Build()
	root, err = labChainRoot(context.Background(), c, labChainKey, false, logr.Discard())
	if err != nil || !bytes.Equal(root, fixture.Data[labtee.SecretCertChain]) {
		t.Errorf("an existing Secret under production: %v; want its root, to recognise lab evidence", err)
	}
}

func TestLabChainRootRefusesABrokenSecret(t *testing.T) {
	broken := fixtureChainSecret(t)
	other, err := labtee.ReadSecretDir("../testdata/labchain/rogue")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := other.SecretData()
	if err != nil {
		t.Fatal(err)
	}
	broken.Data[labtee.SecretVCEK] = rogue[labtee.SecretVCEK]
	c := fake.NewClientBuilder().WithObjects(broken).Build()
	if _, err := labChainRoot(context.Background(), c, labChainKey, true, logr.Discard()); err == nil || !strings.Contains(err.Error(), "no valid lab chain") {
		t.Errorf("a VCEK of another chain: %v, want a refusal", err)
	}
}

// TestLabChainRootLosesTheRace has another replica create the Secret
// between this one's read and its create: both must trust the winner's.
func TestLabChainRootLosesTheRace(t *testing.T) {
	winner := fixtureChainSecret(t)
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.Create(ctx, winner.DeepCopy()); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	root, err := labChainRoot(context.Background(), c, labChainKey, true, logr.Discard())
	if err != nil || !bytes.Equal(root, winner.Data[labtee.SecretCertChain]) {
		t.Errorf("losing the create: %v; want the winner's root", err)
	}
}
