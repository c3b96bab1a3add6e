//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/gpudevices/controller"
)

// timeout bounds every wait for the controller.
const timeout = 30 * time.Second

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func remove(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Delete(context.Background(), o); err != nil {
			t.Fatalf("deleting %T %s: %v", o, o.GetName(), err)
		}
	}
}

func newClass(name, resourceName string, maxCount int32) *gpuv1alpha1.GPUClass {
	return &gpuv1alpha1.GPUClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gpuv1alpha1.GPUClassSpec{
		Vendor: "nvidia", Model: "H100-SXM5-80GB", Mode: gpuv1alpha1.GPUModePassthrough, MaxCount: maxCount,
		SourceKind: gpuv1alpha1.GPUSourceHostDevice, ResourceName: resourceName}}
}

func newDevice(ns, name, class string, count int32) *gpuv1alpha1.GPUDevice {
	return &gpuv1alpha1.GPUDevice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gpuv1alpha1.GPUDeviceSpec{ClassName: class, Count: count}}
}

// newVMI is a VirtualMachineInstance whose device label names device (none
// when empty) with gpus GPUs.
func newVMI(ns, name, device string, gpus int) *unstructured.Unstructured {
	vmi := controller.NewVMI()
	vmi.SetNamespace(ns)
	vmi.SetName(name)
	if device != "" {
		vmi.SetLabels(map[string]string{gpuv1alpha1.LabelDevice: device})
	}
	list := make([]any, 0, gpus)
	for i := range gpus {
		list = append(list, map[string]any{"name": fmt.Sprintf("gpu%d", i), "deviceName": "nvidia.com/GH100_H100_SXM5_80GB"})
	}
	vmi.Object["spec"] = map[string]any{"domain": map[string]any{"devices": map[string]any{"gpus": list}}}
	return vmi
}

func getDevice(ns, name string) (*gpuv1alpha1.GPUDevice, error) {
	d := &gpuv1alpha1.GPUDevice{}
	return d, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
}

func getClass(name string) (*gpuv1alpha1.GPUClass, error) {
	c := &gpuv1alpha1.GPUClass{}
	return c, k8s.Get(context.Background(), client.ObjectKey{Name: name}, c)
}

func getRecord(ns, device string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, k8s.Get(context.Background(), client.ObjectKey{Namespace: platformNamespace, Name: controller.RecordName(ns, device)}, cm)
}

// waitDevice waits until the device satisfies check.
func waitDevice(t *testing.T, ns, name string, check func(*gpuv1alpha1.GPUDevice) error) *gpuv1alpha1.GPUDevice {
	t.Helper()
	var d *gpuv1alpha1.GPUDevice
	eventually(t, timeout, func() error {
		var err error
		if d, err = getDevice(ns, name); err != nil {
			return err
		}
		return check(d)
	})
	return d
}

// phase checks the phase and Ready reason of a device.
func phase(p gpuv1alpha1.GPUDevicePhase, reason string) func(*gpuv1alpha1.GPUDevice) error {
	return func(d *gpuv1alpha1.GPUDevice) error {
		c := meta.FindStatusCondition(d.Status.Conditions, controller.ConditionReady)
		if d.Status.Phase != p || c == nil || c.Reason != reason {
			return fmt.Errorf("device %s: phase %q, Ready %+v; want %s (%s)", d.Name, d.Status.Phase, c, p, reason)
		}
		return nil
	}
}

// heldBy checks that the VMI holds the device.
func heldBy(vmi *unstructured.Unstructured) func(*gpuv1alpha1.GPUDevice) error {
	return func(d *gpuv1alpha1.GPUDevice) error {
		h := d.Status.HeldBy
		if d.Status.Phase != gpuv1alpha1.GPUDeviceHeld || h == nil || h.Name != vmi.GetName() || h.UID != string(vmi.GetUID()) || h.Since.IsZero() {
			return fmt.Errorf("device %s: phase %q, heldBy %+v; want held by %s (%s)", d.Name, d.Status.Phase, h, vmi.GetName(), vmi.GetUID())
		}
		return nil
	}
}

// gone waits until the object no longer exists.
func gone(t *testing.T, obj client.Object) {
	t.Helper()
	eventually(t, timeout, func() error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s still exists (deleting: %v, finalizers %v)", obj.GetName(), obj.GetDeletionTimestamp() != nil, obj.GetFinalizers())
	})
}

// hasFinalizer checks that obj carries finalizer.
func hasFinalizer(obj client.Object, finalizer string) error {
	if !slices.Contains(obj.GetFinalizers(), finalizer) {
		return fmt.Errorf("%s has finalizers %v, want %s", obj.GetName(), obj.GetFinalizers(), finalizer)
	}
	return nil
}

// waitEvent waits for an Event of reason regarding the named object whose
// note contains every part.
func waitEvent(t *testing.T, ns, regarding, reason string, parts ...string) {
	t.Helper()
	eventually(t, timeout, func() error {
		var events eventsv1.EventList
		if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
	next:
		for _, e := range events.Items {
			if e.Regarding.Name != regarding || e.Reason != reason {
				continue
			}
			for _, p := range parts {
				if !strings.Contains(e.Note, p) {
					seen = append(seen, e.Note)
					continue next
				}
			}
			return nil
		}
		return fmt.Errorf("no %s Event on %s with %q; seen %q", reason, regarding, parts, seen)
	})
}

// settings are the GPU controller's settings.
func settings() (*gpuv1alpha1.GPUSettingsSpec, error) {
	s := &gpuv1alpha1.GPUSettings{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: platformNamespace, Name: gpuv1alpha1.SettingsName}, s); err != nil {
		return nil, err
	}
	return &s.Spec, nil
}

// waitHolder waits until the settings' holders list the VMI (want), or
// do not.
func waitHolder(t *testing.T, vmi client.Object, want bool) {
	t.Helper()
	entry := vmi.GetNamespace() + "/" + string(vmi.GetUID())
	eventually(t, timeout, func() error {
		s, err := settings()
		if err != nil {
			return err
		}
		if got := slices.Contains(s.Holders, entry); got != want {
			return fmt.Errorf("settings holders %v list %s: %t, want %t", s.Holders, entry, got, want)
		}
		return nil
	})
}

// waitSettings waits until the settings list exactly the resource names
// of the classes that exist, and check passes on the list.
func waitSettings(t *testing.T, check func(names []string) error) {
	t.Helper()
	eventually(t, timeout, func() error {
		s, err := settings()
		if err != nil {
			return err
		}
		var classes gpuv1alpha1.GPUClassList
		if err := k8s.List(context.Background(), &classes); err != nil {
			return err
		}
		if want := controller.ResourceNames(classes.Items); !slices.Equal(s.ResourceNames, want) {
			return fmt.Errorf("settings %v, want %v", s.ResourceNames, want)
		}
		return check(s.ResourceNames)
	})
}
