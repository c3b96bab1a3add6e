package version

import "testing"

func TestGet(t *testing.T) {
	old := Version
	defer func() { Version = old }()
	for stamped, want := range map[string]string{"": "dev", "dev": "dev", "v0.3.0-2-g1a2b3c4": "v0.3.0-2-g1a2b3c4"} {
		Version = stamped
		if got := Get(); got != want {
			t.Errorf("Get() with Version %q = %q, want %q", stamped, got, want)
		}
	}
}
