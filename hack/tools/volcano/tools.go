//go:build tools

// Package volcano pins the Volcano release the end-to-end suite runs
// (VOLCANO_VERSION in hack/versions.env). hack/build-tools.sh builds its
// scheduler, controller manager and admission webhook from this module;
// nothing here is Volcano's code.
//
// Volcano's own go.mod replaces volcano.sh/apis with a staging directory
// that its module zip leaves out, so this module requires the release of
// volcano.sh/apis that the module proxy serves beside it
// (VOLCANO_APIS_VERSION) and states the rest of Volcano's replace block
// as is.
package volcano

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)
