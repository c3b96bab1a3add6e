package enforcement

import (
	"os"
	"testing"

	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	// The framework records its own metrics, which the scheduler binary
	// registers at start.
	schedmetrics.Register()
	os.Exit(m.Run())
}
