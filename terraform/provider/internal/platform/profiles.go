package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// IntegrationsKey is the chart value that lists orchestrator integrations.
const IntegrationsKey = "orchestratorIntegrations"

// integrationFields are the keys of a profile's integration that become
// keys of its orchestratorIntegrations entry. tenantResources are the
// orchestrator's kinds its tenants create, granted with tenantRBAC.
var integrationFields = []string{"enabled", "schedulerName", "workloadSelector", "binderServiceAccounts", "tenantResources"}

// Profile is one orchestrator profile read from profiles/<name>.yaml.
type Profile struct {
	Name  string
	Entry map[string]any
}

// UnknownProfileError names a profile that profiles/ does not have, and the
// ones it has.
type UnknownProfileError struct {
	Name  string
	Dir   string
	Known []string
}

func (e *UnknownProfileError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("unknown orchestrator profile %q: %s has no %s.yaml (available: %s)", e.Name, e.Dir, e.Name, known)
}

// ListProfiles returns the names of the profiles in dir, sorted.
func ListProfiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading profiles directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names, nil
}

// LoadProfile reads profile name from dir and returns the chart entry it
// stands for.
func LoadProfile(dir, name string) (Profile, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return Profile{}, fmt.Errorf("orchestrator profile %q: a profile is named by its file in %s, without .yaml", name, dir)
	}
	raw, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if errors.Is(err, fs.ErrNotExist) {
		known, _ := ListProfiles(dir)
		return Profile{}, &UnknownProfileError{Name: name, Dir: dir, Known: known}
	}
	if err != nil {
		return Profile{}, fmt.Errorf("orchestrator profile %q: %w", name, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return Profile{}, fmt.Errorf("orchestrator profile %q (%s): %w", name, filepath.Join(dir, name+".yaml"), err)
	}
	// A profile carries its chart entry under integration; the rest
	// (orchestrator, verification) documents it.
	src := doc
	if in, ok := doc["integration"].(map[string]any); ok {
		src = in
	}
	entry := map[string]any{"name": name}
	if n, ok := src["name"].(string); ok && n != "" {
		entry["name"] = n
	}
	for _, k := range integrationFields {
		if v, ok := src[k]; ok {
			entry[k] = v
		}
	}
	if _, ok := entry["schedulerName"]; !ok {
		return Profile{}, fmt.Errorf("orchestrator profile %q (%s): no schedulerName", name, filepath.Join(dir, name+".yaml"))
	}
	return Profile{Name: name, Entry: entry}, nil
}
