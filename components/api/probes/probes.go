// Package probes gives the controllers their health probes: /healthz
// answers while the process runs, /readyz once the manager's informers have
// synced.
package probes

import (
	"errors"
	"net/http"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// Add registers the probes with mgr.
func Add(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informers not synced")
		}
		return nil
	})
}
