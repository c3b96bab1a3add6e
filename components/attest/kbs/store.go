package kbs

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// ErrKeyNotFound is returned by a KeyStore that has no such key.
var ErrKeyNotFound = errors.New("no such key")

// KeyStore keeps the keys. Key returns the key a KeyReleasePolicy names,
// ErrKeyNotFound (wrapped) when there is none, or another error when the
// store could not be read. Secrets is the implementation the broker ships;
// a KMS plugs in here.
type KeyStore interface {
	Key(ctx context.Context, ref v1alpha1.KeySecretReference) ([]byte, error)
}

// Secrets keeps keys in Kubernetes Secrets of one namespace, the broker's.
type Secrets struct {
	// Reader reads Secrets; the broker's is a cache of its namespace's.
	Reader client.Reader
	// Namespace holds the Secrets.
	Namespace string
}

var _ KeyStore = Secrets{}

// Key implements KeyStore.
func (s Secrets) Key(ctx context.Context, ref v1alpha1.KeySecretReference) ([]byte, error) {
	var secret corev1.Secret
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: ref.Name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, ref.Name, ErrKeyNotFound)
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s/%s: %w", s.Namespace, ref.Name, err)
	}
	key, ok := secret.Data[ref.Key]
	if !ok || len(key) == 0 {
		return nil, fmt.Errorf("secret %s/%s has no key %q: %w", s.Namespace, ref.Name, ref.Key, ErrKeyNotFound)
	}
	return key, nil
}
