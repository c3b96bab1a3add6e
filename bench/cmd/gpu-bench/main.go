// Command gpu-bench measures what the chart's GPU device policies add to
// the API server: the latency of a VMI CREATE and of a pod CREATE in a
// tenant namespace with the policies bound and without them, alternating
// rounds on one real kube-apiserver and etcd (envtest assets) with
// KubeVirt's CRDs. The policies are read from the chart's rendered golden
// file, so they are the ones the chart installs.
//
//	go run ./bench/cmd/gpu-bench --out docs/benchmarks/gpudevices-run.md
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/bench/internal/apiserver"
	"github.com/xila-guard/xila-guard/bench/internal/cli"
)

const (
	tenantNS   = "acme"
	platformNS = "xila-guard-system"
	gpu        = "nvidia.com/GH100_H100_SXM5_80GB"
)

var (
	gvrVMI = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	gvrVAP = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"}
	gvrVAB = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"}
	gvrPPS = schema.GroupVersionResource{Group: "guard.xila.us", Version: "v1alpha1", Resource: "policyparametersets"}
)

type options struct {
	assets, crds, kubevirtCRDs, golden, out string
	creates, rounds                         int
}

func main() {
	cli.Main("gpu-bench", func(ctx context.Context) error {
		fs := flag.NewFlagSet("gpu-bench", flag.ContinueOnError)
		o := &options{}
		fs.StringVar(&o.assets, "assets", "_output/envtest", "directory with kube-apiserver and etcd")
		fs.StringVar(&o.crds, "crds", "components/api/config/crd", "directory with the guard CRDs")
		fs.StringVar(&o.kubevirtCRDs, "kubevirt-crds", "components/gpudevices/config/kubevirt-crds", "directory with KubeVirt's CRDs")
		fs.StringVar(&o.golden, "policies", "charts/testdata/golden/gpu-devices.yaml", "the chart rendered with gpuDevicePolicies")
		fs.IntVar(&o.creates, "creates", 300, "VMI and pod CREATEs per variant and round, one at a time")
		fs.IntVar(&o.rounds, "rounds", 4, "rounds; each measures both variants, alternating which goes first")
		fs.StringVar(&o.out, "out", "", "also write the report to this file")
		if err := fs.Parse(os.Args[1:]); err != nil {
			return err
		}
		if o.creates < 10 || o.rounds < 1 {
			return errors.New("want --creates >= 10 and --rounds >= 1")
		}
		return run(ctx, o)
	})
}

// policies are the GPU device policies and bindings of the rendered chart,
// and the release's PolicyParameterSet that some of them read.
func policies(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The golden file ends with the chart's notes, which are not YAML.
	b, _, _ = bytes.Cut(b, []byte("\n# NOTES.txt\n"))
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil || u.Object == nil {
			continue
		}
		if (u.GetKind() == "ValidatingAdmissionPolicy" || u.GetKind() == "ValidatingAdmissionPolicyBinding") && strings.HasPrefix(u.GetName(), "xila-guard-gpu-") ||
			u.GetKind() == "PolicyParameterSet" {
			out = append(out, u)
		}
	}
	if len(out) != 19 {
		return nil, fmt.Errorf("%s: %d GPU device policies, bindings and parameters, want 19", path, len(out))
	}
	return out, nil
}

type variant string

const (
	off variant = "policies off"
	on  variant = "policies on"
)

func run(ctx context.Context, o *options) error {
	pols, err := policies(o.golden)
	if err != nil {
		return err
	}
	s, err := apiserver.Start(o.assets, o.crds, "gpu-bench", "gpu-bench")
	if err != nil {
		return err
	}
	defer s.Stop()
	if _, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: []string{o.kubevirtCRDs}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing KubeVirt's CRDs: %w", err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{"guard.xila.us/tenant": tenantNS}}},
		{ObjectMeta: metav1.ObjectMeta{Name: platformNS}},
	} {
		if _, err := s.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := s.Kube.CoreV1().ServiceAccounts(tenantNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	settings := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gpu.guard.xila.us/v1alpha1", "kind": "GPUSettings",
		"metadata": map[string]any{"name": "xila-guard-gpu-settings", "namespace": platformNS},
		"spec":     map[string]any{"resourceNames": []any{"nvidia.com/A10", gpu}, "kubevirtController": "system:serviceaccount:kubevirt:kubevirt-controller"},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "gpu.guard.xila.us", Version: "v1alpha1", Resource: "gpusettings"}).
		Namespace(platformNS).Create(ctx, settings, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the GPU settings: %w", err)
	}
	b := &bench{o: o, dyn: dyn, s: s, pols: pols}
	results := map[variant]map[string][][]time.Duration{off: {}, on: {}}
	for r := range o.rounds {
		order := []variant{off, on}
		if r%2 == 1 {
			order = []variant{on, off}
		}
		for _, v := range order {
			if err := b.set(ctx, v); err != nil {
				return err
			}
			for _, kind := range []string{"VMI", "pod"} {
				lat, err := b.creates(ctx, kind, r)
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", r+1, v, kind, err)
				}
				results[v][kind] = append(results[v][kind], lat)
			}
			fmt.Fprintf(os.Stderr, "round %d/%d %s done\n", r+1, o.rounds, v)
		}
	}
	var w io.Writer = os.Stdout
	var buf bytes.Buffer
	if o.out != "" {
		w = io.MultiWriter(os.Stdout, &buf)
	}
	report(w, o, results)
	if o.out != "" {
		return os.WriteFile(o.out, buf.Bytes(), 0o644)
	}
	return nil
}

type bench struct {
	o    *options
	dyn  dynamic.Interface
	s    *apiserver.Server
	pols []*unstructured.Unstructured
}

// set binds the policies (on) or removes them (off) and waits until the
// API server applies that: a GPU pod of no VMI is refused, or admitted.
func (b *bench) set(ctx context.Context, v variant) error {
	for _, p := range b.pols {
		gvr := gvrVAP
		switch p.GetKind() {
		case "ValidatingAdmissionPolicyBinding":
			gvr = gvrVAB
		case "PolicyParameterSet":
			gvr = gvrPPS
		}
		var err error
		if v == on {
			_, err = b.dyn.Resource(gvr).Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		} else {
			err = b.dyn.Resource(gvr).Delete(ctx, p.GetName(), metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	probe := pod("probe", true)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.s.Kube.CoreV1().Pods(tenantNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		refused := err != nil && strings.Contains(err.Error(), "GPU_RESOURCE_FORBIDDEN")
		return refused == (v == on), nil
	})
}

func pod(name string, withGPU bool) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: "registry.example/app@sha256:" + strings.Repeat("a", 64),
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	if withGPU {
		c.Resources.Limits = corev1.ResourceList{gpu: resource.MustParse("1")}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenantNS, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c, {Name: "sidecar", Image: c.Image}}}}
}

func vmi(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": name, "namespace": tenantNS, "labels": map[string]any{"gpu.guard.xila.us/device": "h100-a"}},
		"spec": map[string]any{"domain": map[string]any{
			"devices":   map[string]any{"gpus": []any{map[string]any{"name": "gpu1", "deviceName": gpu}}},
			"resources": map[string]any{"requests": map[string]any{"memory": "8Gi", "cpu": "4"}},
		}},
	}}
}

// creates stores o.creates objects of kind one at a time and returns each
// CREATE's latency; it deletes them afterwards, outside the measurement.
func (b *bench) creates(ctx context.Context, kind string, round int) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, b.o.creates)
	for i := range b.o.creates {
		name := fmt.Sprintf("bench-%d-%d", round, i)
		start := time.Now()
		var err error
		if kind == "VMI" {
			_, err = b.dyn.Resource(gvrVMI).Namespace(tenantNS).Create(ctx, vmi(name), metav1.CreateOptions{})
		} else {
			_, err = b.s.Kube.CoreV1().Pods(tenantNS).Create(ctx, pod(name, false), metav1.CreateOptions{})
		}
		if err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	if kind == "VMI" {
		return lat, b.dyn.Resource(gvrVMI).Namespace(tenantNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	zero := int64(0)
	return lat, b.s.Kube.CoreV1().Pods(tenantNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func report(w io.Writer, o *options, results map[variant]map[string][][]time.Duration) {
	fmt.Fprintf(w, "%d CREATEs per kind, variant and round, one at a time; %d rounds alternating which variant goes first. Medians over rounds.\n\n", o.creates, o.rounds)
	fmt.Fprintln(w, "| CREATE | policies off p50 | on p50 | ratio | off p99 | on p99 | ratio |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	for _, kind := range []string{"VMI", "pod"} {
		var p50, p99 [2][]time.Duration
		for i, v := range []variant{off, on} {
			for _, lat := range results[v][kind] {
				p50[i] = append(p50[i], quantile(lat, 0.5))
				p99[i] = append(p99[i], quantile(lat, 0.99))
			}
		}
		a50, b50, a99, b99 := median(p50[0]), median(p50[1]), median(p99[0]), median(p99[1])
		fmt.Fprintf(w, "| %s | %s | %s | %.2f | %s | %s | %.2f |\n", kind, ms(a50), ms(b50), float64(b50)/float64(a50), ms(a99), ms(b99), float64(b99)/float64(a99))
	}
}
