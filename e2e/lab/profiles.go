package lab

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Profile reads profiles/<name>.yaml and returns its chart values entry
// for orchestratorIntegrations.
func (c *Cluster) Profile(name string) (map[string]any, error) {
	f, err := os.Open(filepath.Join(c.RepoRoot, "profiles", name+".yaml"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var p struct {
		Integration map[string]any `json:"integration"`
	}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&p); err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	if p.Integration == nil {
		return nil, fmt.Errorf("profile %s has no integration", name)
	}
	return p.Integration, nil
}

// ValuesFile reads a chart values file into a values map for InstallChart.
func ValuesFile(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	values := map[string]any{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&values); err != nil {
		return nil, fmt.Errorf("values %s: %w", path, err)
	}
	return values, nil
}
