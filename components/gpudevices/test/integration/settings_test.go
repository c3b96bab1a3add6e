//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// TestIntegrationSettings checks the settings: written at start
// with no class, then listing the sorted, distinct resource names of the
// classes as they come and go, and put back when deleted.
func TestIntegrationSettings(t *testing.T) {
	showLogsOnFailure(t)
	if initialSettings == nil {
		t.Fatal("no settings at start")
	}
	if v := initialSettings.Spec.ResourceNames; len(v) != 0 {
		t.Errorf("settings at start list resource names %v, want none", v)
	}
	if v := initialSettings.Spec.KubeVirtController; v != "system:serviceaccount:kubevirt:kubevirt-controller" {
		t.Errorf("settings at start name KubeVirt's controller %q, want the default account", v)
	}
	if initialSettings.Labels["app.kubernetes.io/managed-by"] != "xila-guard-gpudevices" {
		t.Errorf("settings labels %v", initialSettings.Labels)
	}

	a, b := newClass("settings-a", "nvidia.com/SETTINGS_A", 1), newClass("settings-b", "nvidia.com/SETTINGS_B", 1)
	twin := newClass("settings-a-twin", "nvidia.com/SETTINGS_A", 2)
	create(t, b, a, twin)
	waitSettings(t, func(names []string) error {
		i, j := slices.Index(names, "nvidia.com/SETTINGS_A"), slices.Index(names, "nvidia.com/SETTINGS_B")
		if i < 0 || j != i+1 {
			return fmt.Errorf("settings %v: want SETTINGS_A once, then SETTINGS_B", names)
		}
		return nil
	})

	remove(t, b)
	gone(t, b)
	waitSettings(t, func(names []string) error {
		if slices.Contains(names, "nvidia.com/SETTINGS_B") || !slices.Contains(names, "nvidia.com/SETTINGS_A") {
			return fmt.Errorf("settings %v after deleting settings-b", names)
		}
		return nil
	})

	// Deleted, the settings come back.
	s := &gpuv1alpha1.GPUSettings{}
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: platformNamespace, Name: gpuv1alpha1.SettingsName}, s); err != nil {
		t.Fatal(err)
	}
	old := s.UID
	remove(t, s)
	eventually(t, timeout, func() error {
		again := &gpuv1alpha1.GPUSettings{}
		if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: platformNamespace, Name: gpuv1alpha1.SettingsName}, again); err != nil {
			return err
		}
		if again.UID == old {
			return fmt.Errorf("the deleted settings are still there")
		}
		return nil
	})
	waitSettings(t, func([]string) error { return nil })
}

// TestIntegrationEndpoints checks the probes and the metrics of the
// controller.
func TestIntegrationEndpoints(t *testing.T) {
	showLogsOnFailure(t)
	ns := namespace(t, "endpoints")
	class := newClass("endpoints", "nvidia.com/ENDPOINTS", 1)
	create(t, class, newDevice(ns, "gpu", class.Name, 1))
	for _, path := range []string{"http://" + probeAddr + "/healthz", "http://" + probeAddr + "/readyz"} {
		eventually(t, timeout, func() error {
			_, err := get(path)
			return err
		})
	}
	eventually(t, timeout, func() error {
		body, err := get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{`xila_guard_gpudevices_reconcile_errors_total{controller="gpudevice"}`, `xila_guard_gpudevices_devices{class="endpoints",phase="Available"} 1`} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("metrics without %s", want)
			}
		}
		return nil
	})
}

func get(url string) (string, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(body), nil
}
