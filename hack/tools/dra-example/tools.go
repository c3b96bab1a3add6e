//go:build tools

// Package draexample pins the DRA example driver
// (sigs.k8s.io/dra-example-driver, DRA_EXAMPLE_VERSION in
// hack/versions.env) that the end-to-end suite runs as a real Dynamic
// Resource Allocation driver: hack/build-tools.sh builds its kubelet
// plugin from this module, and the suite installs the Helm chart its
// module zip ships. It is its own module because the driver builds
// against another Kubernetes minor than the project. Nothing here is the
// driver's code.
package draexample

import (
	_ "sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin"
)
