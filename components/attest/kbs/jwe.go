package kbs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// minRSABits is the smallest RSA key the broker encrypts to.
const minRSABits = 2048

// contentEncryption is the JWE content encryption of every answer.
const contentEncryption = jose.A256GCM

// keyAlgorithm chooses the key management algorithm for a public key.
func keyAlgorithm(k *jose.JSONWebKey) (jose.KeyAlgorithm, error) {
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return "", fmt.Errorf("tee-pubkey is an RSA key of %d bits; at least %d are needed", pub.N.BitLen(), minRSABits)
		}
		return jose.RSA_OAEP_256, nil
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
			return jose.ECDH_ES_A256KW, nil
		}
		return "", fmt.Errorf("tee-pubkey is an EC key on %s; P-256, P-384 or P-521 is needed", pub.Curve.Params().Name)
	}
	return "", fmt.Errorf("tee-pubkey is a %T key; RSA or EC is needed", k.Key)
}

// seal encrypts the key to the public key, in JWE flattened JSON
// serialization.
func seal(key []byte, to *jose.JSONWebKey, alg jose.KeyAlgorithm) ([]byte, error) {
	enc, err := jose.NewEncrypter(contentEncryption, jose.Recipient{Algorithm: alg, Key: to.Key, KeyID: to.KeyID}, nil)
	if err != nil {
		return nil, fmt.Errorf("preparing the JWE: %w", err)
	}
	obj, err := enc.Encrypt(key)
	if err != nil {
		return nil, fmt.Errorf("encrypting the key: %w", err)
	}
	return []byte(obj.FullSerialize()), nil
}
