package platform

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// crdFieldManager owns the CRDs the provider applies (server-side apply).
const crdFieldManager = "xilaguard-terraform"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDs are the CustomResourceDefinitions of a directory, in file order.
type CRDs struct {
	Dir     string
	Objects []*unstructured.Unstructured
	// Digest is the SHA-256 of the files: changed files show up in a plan.
	Digest string
}

// Names returns the names of the CRDs.
func (c *CRDs) Names() []string {
	var out []string
	for _, o := range c.Objects {
		out = append(out, o.GetName())
	}
	return out
}

// LoadCRDs reads every .yaml file of dir. Each document must be an
// apiextensions.k8s.io/v1 CustomResourceDefinition; the error names the
// file that is not.
func LoadCRDs(dir string) (*CRDs, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the CRD directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	out := &CRDs{Dir: dir}
	h := sha256.New()
	for _, name := range files {
		file := filepath.Join(dir, name)
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading CRD file: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(raw))
		h.Write(raw)
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetAPIVersion() != "apiextensions.k8s.io/v1" || obj.GetKind() != "CustomResourceDefinition" || obj.GetName() == "" {
				return nil, fmt.Errorf("%s: want apiextensions.k8s.io/v1 CustomResourceDefinition objects with a name, found apiVersion %q kind %q name %q", file, obj.GetAPIVersion(), obj.GetKind(), obj.GetName())
			}
			out.Objects = append(out.Objects, obj)
		}
	}
	if len(out.Objects) == 0 {
		return nil, fmt.Errorf("%s has no CustomResourceDefinition (.yaml files)", dir)
	}
	out.Digest = hex.EncodeToString(h.Sum(nil))
	return out, nil
}

// ApplyCRDs creates or updates the CRDs (server-side apply) and waits up to
// timeout for every one of them to be Established, so that the workloads
// that watch them start clean.
func (c *Client) ApplyCRDs(ctx context.Context, crds *CRDs, timeout time.Duration) error {
	if crds == nil {
		return nil
	}
	cfg, err := c.getter.ToRESTConfig()
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := dc.Resource(crdResource)
	for _, obj := range crds.Objects {
		body, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("CRD %s: %w", obj.GetName(), err)
		}
		force := true
		if _, err := api.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: crdFieldManager, Force: &force}); err != nil {
			return fmt.Errorf("applying CRD %s from %s: %w", obj.GetName(), crds.Dir, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, name := range crds.Names() {
		var last string
		err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				last = "not found"
				return false, nil
			}
			if err != nil {
				last = err.Error()
				return false, nil
			}
			ok, msg := established(got)
			last = msg
			return ok, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s was not Established within %s (%s)", name, timeout, last)
		}
	}
	return nil
}

// established reports whether a CRD's Established condition is True, and
// what the condition says otherwise.
func established(crd *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Established" {
			continue
		}
		if m["status"] == "True" {
			return true, ""
		}
		return false, fmt.Sprintf("Established=%v: %v", m["status"], m["message"])
	}
	return false, "no Established condition yet"
}
