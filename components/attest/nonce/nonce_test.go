package nonce

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"testing"
)

func TestForBindsEveryField(t *testing.T) {
	challenge := []byte("challenge-0123456789abcdef012345")
	base := For("uid-1", "boot-1", challenge)
	cases := []struct {
		name             string
		uid, incarnation string
		challenge        []byte
	}{
		{"another node", "uid-2", "boot-1", challenge},
		{"another incarnation", "uid-1", "boot-2", challenge},
		{"another challenge", "uid-1", "boot-1", []byte("challenge-0123456789abcdef012346")},
		// Without length prefixes these would hash the same bytes.
		{"shifted boundary", "uid-1b", "oot-1", challenge},
		{"empty incarnation", "uid-1boot-1", "", challenge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := For(tc.uid, tc.incarnation, tc.challenge); got == base {
				t.Errorf("For(%q, %q, %q) equals the nonce of another binding", tc.uid, tc.incarnation, tc.challenge)
			}
		})
	}
	if again := For("uid-1", "boot-1", bytes.Clone(challenge)); again != base {
		t.Error("For is not deterministic")
	}
}

// TestForValue pins the construction: changing it invalidates every
// outstanding challenge, so it must be a deliberate, versioned change.
func TestForValue(t *testing.T) {
	h := sha512.New()
	for _, f := range []string{domain, "u", "i", "c"} {
		h.Write([]byte{0, 0, 0, 0, 0, 0, 0, byte(len(f))})
		h.Write([]byte(f))
	}
	want := h.Sum(nil)
	got := For("u", "i", []byte("c"))
	if !bytes.Equal(got[:], want) {
		t.Errorf("For = %s, want %s", hex.EncodeToString(got[:]), hex.EncodeToString(want))
	}
	if len(got) != 64 {
		t.Errorf("nonce is %d bytes, want 64", len(got))
	}
}

// TestForDevicesBindsTheDevices: evidence that states devices has another
// nonce than evidence that states none, or other devices.
func TestForDevicesBindsTheDevices(t *testing.T) {
	c := []byte("challenge-0123456789abcdef012345")
	with := ForDevices("uid-1", "boot-1", c, []byte(`[{"id":"GPU-1"}]`))
	for name, other := range map[string][Size]byte{
		"no devices":       For("uid-1", "boot-1", c),
		"an empty list":    ForDevices("uid-1", "boot-1", c, nil),
		"other devices":    ForDevices("uid-1", "boot-1", c, []byte(`[{"id":"GPU-2"}]`)),
		"another node":     ForDevices("uid-2", "boot-1", c, []byte(`[{"id":"GPU-1"}]`)),
		"shifted boundary": ForDevices("uid-1", "boot-1", append(bytes.Clone(c), '['), []byte(`{"id":"GPU-1"}]`)),
	} {
		if other == with {
			t.Errorf("the nonce of %s equals that of the devices", name)
		}
	}
	if ForDevices("uid-1", "boot-1", c, []byte(`[{"id":"GPU-1"}]`)) != with {
		t.Error("ForDevices is not deterministic")
	}
}

func TestNewChallenge(t *testing.T) {
	a, b := NewChallenge(), NewChallenge()
	if len(a) != ChallengeSize || len(b) != ChallengeSize {
		t.Fatalf("challenges are %d and %d bytes, want %d", len(a), len(b), ChallengeSize)
	}
	if bytes.Equal(a, b) {
		t.Error("two challenges are equal")
	}
}
