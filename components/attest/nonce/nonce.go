package nonce

import (
	"crypto/rand"
	"crypto/sha512"
	"encoding/binary"
)

// Size is the size of a nonce: the report data of an SEV-SNP report and of
// a TDX quote are both 64 bytes, and SHA-512 fills them.
const Size = sha512.Size

// ChallengeSize is the size of the challenges NewChallenge makes.
const ChallengeSize = 32

// domain separates these nonces from any other use of SHA-512 over the
// same fields.
const domain = "xila-guard attest nonce v1"

// For returns the nonce that binds a challenge to a node and an evidence
// incarnation: SHA-512 over a domain string and the three values, each
// prefixed with its length so that no two inputs give the same bytes.
func For(nodeUID, incarnation string, challenge []byte) [Size]byte {
	return sum(domain, []byte(nodeUID), []byte(incarnation), challenge)
}

// devicesDomain separates the nonces of evidence that states devices from
// those of evidence that states none.
const devicesDomain = "xila-guard attest nonce with devices v1"

// ForDevices returns the nonce of evidence that also states the devices
// the TEE holds, encoded as devices: For's fields and the encoding, under
// a domain of its own, so that the report's signature covers the devices
// too and evidence stating none can never pass for evidence stating some.
func ForDevices(nodeUID, incarnation string, challenge, devices []byte) [Size]byte {
	return sum(devicesDomain, []byte(nodeUID), []byte(incarnation), challenge, devices)
}

func sum(domain string, fields ...[]byte) [Size]byte {
	h := sha512.New()
	for _, field := range append([][]byte{[]byte(domain)}, fields...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(field)))
		h.Write(n[:])
		h.Write(field)
	}
	var out [Size]byte
	h.Sum(out[:0])
	return out
}

// NewChallenge returns a fresh random challenge of ChallengeSize bytes.
func NewChallenge() []byte {
	c := make([]byte, ChallengeSize)
	// crypto/rand.Read never fails: it crashes the program rather than
	// return predictable bytes.
	rand.Read(c)
	return c
}
