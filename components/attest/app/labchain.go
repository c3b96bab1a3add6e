package app

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/attest/labtee"
)

// LabChainComponent is the app.kubernetes.io/component label of the lab
// chain Secret the controller creates.
const LabChainComponent = "lab-chain"

// labChainRoot returns the lab root of trust kept in the Secret key: the
// ASK and ARK of its chain, after checking that the chain and its keys
// agree. When the Secret does not exist, it is created with a new chain if
// create is set (the lab profile), and no root is returned otherwise (a
// production controller has nothing to recognise). Replicas that start
// together agree: the one whose create loses reads the winner's chain.
func labChainRoot(ctx context.Context, c client.Client, key types.NamespacedName, create bool, log logr.Logger) ([]byte, error) {
	var s corev1.Secret
	err := c.Get(ctx, key, &s)
	switch {
	case err == nil:
	case apierrors.IsNotFound(err) && !create:
		log.Info("no lab chain Secret: lab evidence will be refused as invalid, not recognised as TEST_ROOT_OF_TRUST", "secret", key.String())
		return nil, nil
	case apierrors.IsNotFound(err):
		if s, err = createLabChain(ctx, c, key, log); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("reading the Secret: %w", err)
	}
	chain, err := labtee.ParseSecretData(s.Data)
	if err != nil {
		return nil, fmt.Errorf("the Secret holds no valid lab chain (delete it to have a new one made): %w", err)
	}
	return chain.RootPEM(), nil
}

// createLabChain generates a lab chain and stores it in an immutable
// Secret, or reads the Secret another replica created first.
func createLabChain(ctx context.Context, c client.Client, key types.NamespacedName, log logr.Logger) (corev1.Secret, error) {
	chain, err := labtee.New(labtee.Options{})
	if err != nil {
		return corev1.Secret{}, fmt.Errorf("generating a lab chain: %w", err)
	}
	data, err := chain.SecretData()
	if err != nil {
		return corev1.Secret{}, err
	}
	immutable := true
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{
			"app.kubernetes.io/name": Name, "app.kubernetes.io/component": LabChainComponent,
		}},
		Type:      corev1.SecretTypeOpaque,
		Data:      data,
		Immutable: &immutable,
	}
	switch err := c.Create(ctx, &s); {
	case err == nil:
		log.Info("created a lab chain", "secret", key.String(), "productLine", chain.ProductLine, "chipID", fmt.Sprintf("%x", chain.ChipID[:8]))
		return s, nil
	case apierrors.IsAlreadyExists(err):
		var won corev1.Secret
		if err := c.Get(ctx, key, &won); err != nil {
			return corev1.Secret{}, fmt.Errorf("reading the Secret another replica created: %w", err)
		}
		return won, nil
	default:
		return corev1.Secret{}, fmt.Errorf("creating the Secret: %w", err)
	}
}
