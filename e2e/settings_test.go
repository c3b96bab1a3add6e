//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// settings describes the cluster and images the suite runs against. The
// Makefile's e2e target sets every variable; running `go test` by hand needs
// the same ones.
type settings struct {
	RepoRoot    string
	BinDir      string   // XG_BIN: kind, kubectl and the other built tools
	ClusterName string   // CLUSTER_NAME, default xila-guard
	NodeImage   string   // NODE_IMAGE: the kind node image
	ImageTag    string   // XG_IMAGE_TAG: tag of the component images
	Components  []string // components that have an image to load
	Agnhost     string   // AGNHOST_IMAGE, preloaded in the node image
	// VolcanoManifest is VOLCANO_MANIFEST: Volcano's release manifest, a
	// file (of the module make e2e builds Volcano from) or a URL.
	VolcanoManifest string
	// VolcanoImages is VOLCANO_IMAGES, binary=image,...: the images make
	// e2e built for Volcano's binaries (vc-scheduler, vc-controller-manager,
	// vc-webhook-manager), loaded into the cluster. Empty: Volcano's
	// published images, pulled from its registry (make e2e-volcano).
	VolcanoImages map[string]string
	// DRAExampleChart and DRAExampleImage are DRA_EXAMPLE_CHART and
	// DRA_EXAMPLE_IMAGE: the DRA example driver's Helm chart (a directory
	// of the module make e2e builds the driver from) and the image make
	// e2e built of its kubelet plugin, loaded into the workers.
	DRAExampleChart string
	DRAExampleImage string
}

func settingsFromEnv() (settings, error) {
	wd, err := os.Getwd()
	if err != nil {
		return settings{}, err
	}
	s := settings{
		RepoRoot:    filepath.Dir(wd),
		BinDir:      os.Getenv("XG_BIN"),
		ClusterName: envOr("CLUSTER_NAME", "xila-guard"),
		NodeImage:   os.Getenv("NODE_IMAGE"),
		ImageTag:    os.Getenv("XG_IMAGE_TAG"),
		Agnhost:     os.Getenv("AGNHOST_IMAGE"),

		VolcanoManifest: os.Getenv("VOLCANO_MANIFEST"),
		VolcanoImages:   map[string]string{},
		DRAExampleChart: os.Getenv("DRA_EXAMPLE_CHART"),
		DRAExampleImage: os.Getenv("DRA_EXAMPLE_IMAGE"),
	}
	for _, kv := range strings.Split(os.Getenv("VOLCANO_IMAGES"), ",") {
		if b, img, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			s.VolcanoImages[b] = img
		} else if kv != "" {
			return s, fmt.Errorf("VOLCANO_IMAGES: %q is not binary=image", kv)
		}
	}
	var missing []string
	for name, v := range map[string]string{"XG_BIN": s.BinDir, "NODE_IMAGE": s.NodeImage, "XG_IMAGE_TAG": s.ImageTag, "AGNHOST_IMAGE": s.Agnhost,
		"VOLCANO_MANIFEST": s.VolcanoManifest, "DRA_EXAMPLE_CHART": s.DRAExampleChart, "DRA_EXAMPLE_IMAGE": s.DRAExampleImage} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return s, fmt.Errorf("%s not set: run the suite with make e2e", strings.Join(missing, ", "))
	}
	if _, err := os.Stat(filepath.Join(s.BinDir, "kind")); err != nil {
		return s, fmt.Errorf("no kind binary in XG_BIN=%s: run make tools", s.BinDir)
	}
	if err := exec.Command("docker", "image", "inspect", s.NodeImage).Run(); err != nil {
		return s, fmt.Errorf("node image %s is missing: run make kind-image", s.NodeImage)
	}
	dirs, err := filepath.Glob(filepath.Join(s.RepoRoot, "components", "*", "cmd", "xila-guard-*"))
	if err != nil {
		return s, err
	}
	for _, d := range dirs {
		s.Components = append(s.Components, filepath.Base(filepath.Dir(filepath.Dir(d))))
	}
	for _, c := range s.Components {
		if err := exec.Command("docker", "image", "inspect", s.componentImage(c)).Run(); err != nil {
			return s, errors.New("image " + s.componentImage(c) + " is missing: run make images")
		}
	}
	for _, img := range append(slices.Collect(maps.Values(s.VolcanoImages)), s.DRAExampleImage) {
		if err := exec.Command("docker", "image", "inspect", img).Run(); err != nil {
			return s, errors.New("image " + img + " is missing: run make dependency-images")
		}
	}
	return s, nil
}

func (s settings) componentImage(component string) string {
	return "xila-guard/" + component + ":" + s.ImageTag
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
