package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// variantConfigs turn the example profile into each variant's.
var variantConfigs = map[string]func(profile map[string]any){
	// plugin is the example configuration as it ships.
	"plugin": func(map[string]any) {},
	// stock is the same binary with the plugin disabled: the default
	// plugins, TaintToleration included.
	"stock": func(profile map[string]any) {
		delete(profile, "plugins")
		delete(profile, "pluginConfig")
	},
	// every-cycle is the plugin judging in every cycle, with no answer
	// reuse: what the snapshot alone achieves.
	"every-cycle": func(profile map[string]any) {
		pluginArgs(profile)["answerReuse"] = "0s"
	},
	// affinity is stock kube-scheduler scheduling pods that carry, in
	// place of enforcement, the node affinity and toleration that give
	// the same placement (podFor).
	"affinity": func(profile map[string]any) {
		delete(profile, "plugins")
		delete(profile, "pluginConfig")
	},
}

// variantDescriptions name the variants in the report.
var variantDescriptions = map[string]string{
	"plugin":      "(a) xila-guard-scheduler",
	"every-cycle": "(a′) same, answers never reused",
	"stock":       "(b) same binary, plugin disabled",
	"affinity":    "(d) stock scheduler, pods with affinity and tolerations",
}

// writeConfig writes a variant's KubeSchedulerConfiguration, derived from
// the example at path, and returns its file name. Every variant gets the
// same client limits and the stopwatch, which runs first in PreFilter.
func writeConfig(c *cluster, example, variant string, qps int) (string, error) {
	data, err := os.ReadFile(example)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", example, err)
	}
	limit, burst := float64(qps), 2*qps
	if qps == 0 {
		limit, burst = unthrottled, unthrottled
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": c.Kubeconfig, "qps": limit, "burst": burst}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	profile := cfg["profiles"].([]any)[0].(map[string]any)
	if profile["schedulerName"] != guard.SchedulerName {
		return "", fmt.Errorf("%s: the first profile is not %s", example, guard.SchedulerName)
	}
	variantConfigs[variant](profile)

	plugins, _ := profile["plugins"].(map[string]any)
	if plugins == nil {
		plugins = map[string]any{}
		profile["plugins"] = plugins
	}
	first := map[string]any{"name": stopwatchName}
	for _, point := range []string{"multiPoint", "preFilter"} {
		set, _ := plugins[point].(map[string]any)
		if set == nil {
			set = map[string]any{}
			plugins[point] = set
		}
		enabled, _ := set["enabled"].([]any)
		set["enabled"] = append([]any{first}, enabled...)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	file := filepath.Join(c.Dir, variant+".yaml")
	return file, os.WriteFile(file, out, 0o600)
}

// unthrottled is a client QPS and burst no run comes near.
const unthrottled = 1_000_000

// pluginArgs returns the XilaGuardEnforcement args of a profile, or nil.
func pluginArgs(profile map[string]any) map[string]any {
	configs, _ := profile["pluginConfig"].([]any)
	for _, pc := range configs {
		m, _ := pc.(map[string]any)
		if m["name"] == guard.PluginName {
			args, _ := m["args"].(map[string]any)
			if args == nil {
				args = map[string]any{}
				m["args"] = args
			}
			return args
		}
	}
	return nil
}
