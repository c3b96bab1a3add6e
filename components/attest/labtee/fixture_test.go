package labtee

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// The lab chains in ../testdata/labchain serve the tests of the other
// packages, so that they (and every fuzz worker) need not generate RSA
// keys. Regenerate them with
//
//	go test ./labtee -run TestFixture -update-fixture
var updateFixture = flag.Bool("update-fixture", false, "regenerate ../testdata/labchain")

// fixtureDir holds one directory per chain, each with a file per Secret key.
const fixtureDir = "../testdata/labchain"

func TestFixture(t *testing.T) {
	names := []string{"lab", "rogue"}
	if *updateFixture {
		for _, name := range names {
			c, err := New(Options{TCB: testTCB, Now: installedAt, RSABits: 2048})
			if err != nil {
				t.Fatal(err)
			}
			data, err := c.SecretData()
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(fixtureDir, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for key, value := range data {
				if err := os.WriteFile(filepath.Join(dir, key), value, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, name := range names {
		c, err := ReadSecretDir(filepath.Join(fixtureDir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.TCB != testTCB {
			t.Errorf("%s: TCB %v, want %v", name, c.TCB, testTCB)
		}
		ev, err := c.Sign(Report{})
		if err != nil {
			t.Fatal(err)
		}
		if err := verifyWithLibrary(t, c, ev, installedAt); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
