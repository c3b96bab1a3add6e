//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/gpudevices/controller"
)

// TestIntegrationRefusesWithoutVMICRD checks what the controller did when
// started before the VMI CRD existed: it stopped at once with an error
// that says so.
func TestIntegrationRefusesWithoutVMICRD(t *testing.T) {
	if !errors.Is(noVMIsErr, controller.ErrNoVMIs) {
		t.Fatalf("run without the VMI CRD returned %v, want ErrNoVMIs", noVMIsErr)
	}
	if !strings.Contains(noVMIsErr.Error(), "VirtualMachineInstance") {
		t.Errorf("error %q does not name VirtualMachineInstance", noVMIsErr)
	}
}

// TestIntegrationDeviceLifecycle follows a device from its order to its
// deletion: finalizers, Available, Held by a VMI with a usage record,
// Released while the VMI still uses it, and gone with its record once the
// VMI is.
func TestIntegrationDeviceLifecycle(t *testing.T) {
	showLogsOnFailure(t)
	ctx := context.Background()
	ns := namespace(t, "lifecycle")
	class := newClass("lifecycle", "nvidia.com/LIFECYCLE", 2)
	dev := newDevice(ns, "gpu", class.Name, 2)
	create(t, class, dev)

	eventually(t, timeout, func() error {
		c, err := getClass(class.Name)
		if err != nil {
			return err
		}
		if err := hasFinalizer(c, gpuv1alpha1.FinalizerClass); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(c.Status.Conditions, controller.ConditionReady); r == nil || r.Status != "True" {
			return fmt.Errorf("class Ready %+v", r)
		}
		return nil
	})
	d := waitDevice(t, ns, dev.Name, phase(gpuv1alpha1.GPUDeviceAvailable, controller.ReasonValid))
	if err := hasFinalizer(d, gpuv1alpha1.FinalizerDevice); err != nil {
		t.Error(err)
	}
	if d.Status.ResourceName != class.Spec.ResourceName || d.Status.HeldBy != nil || d.Status.ObservedGeneration != d.Generation {
		t.Errorf("available status %+v", d.Status)
	}
	if _, err := getRecord(ns, dev.Name); !apierrors.IsNotFound(err) {
		t.Errorf("usage record of an available device: %v", err)
	}

	vmi := newVMI(ns, "vm", dev.Name, 2)
	create(t, vmi)
	d = waitDevice(t, ns, dev.Name, heldBy(vmi))
	since := d.Status.HeldBy.Since
	waitHolder(t, vmi, true)
	waitEvent(t, ns, dev.Name, controller.EventDeviceHeld, "vm")
	var record *corev1.ConfigMap
	eventually(t, timeout, func() error {
		var err error
		record, err = getRecord(ns, dev.Name)
		return err
	})
	want := map[string]string{"namespace": ns, "device": "gpu", "class": class.Name, "resourceName": "nvidia.com/LIFECYCLE",
		"count": "2", "vmi": "vm", "vmiUID": string(vmi.GetUID()), "since": since.UTC().Format("2006-01-02T15:04:05Z07:00")}
	if !maps.Equal(record.Data, want) {
		t.Errorf("usage record data %v, want %v", record.Data, want)
	}
	if record.Labels[gpuv1alpha1.LabelUsage] != ns+".gpu" || record.Labels["app.kubernetes.io/managed-by"] != "xila-guard-gpudevices" {
		t.Errorf("usage record labels %v", record.Labels)
	}
	eventually(t, timeout, func() error {
		c, err := getClass(class.Name)
		if err != nil {
			return err
		}
		if c.Status.HeldDevices != 1 {
			return fmt.Errorf("class heldDevices %d, want 1", c.Status.HeldDevices)
		}
		return nil
	})

	// A change to the VMI does not move since.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(vmi), vmi); err != nil {
			return err
		}
		labels := vmi.GetLabels()
		labels["touched"] = "yes"
		vmi.SetLabels(labels)
		return k8s.Update(ctx, vmi)
	}); err != nil {
		t.Fatal(err)
	}
	waitDevice(t, ns, dev.Name, func(d *gpuv1alpha1.GPUDevice) error {
		if !d.Status.HeldBy.Since.Equal(&since) {
			return fmt.Errorf("since moved from %s to %s", since, d.Status.HeldBy.Since)
		}
		return heldBy(vmi)(d)
	})

	// Deleting the device while the VMI runs: Released, kept, record kept.
	remove(t, dev)
	d = waitDevice(t, ns, dev.Name, phase(gpuv1alpha1.GPUDeviceReleased, controller.ReasonReleased))
	waitEvent(t, ns, dev.Name, controller.EventDeviceReleased, "being deleted")
	if err := hasFinalizer(d, gpuv1alpha1.FinalizerDevice); err != nil {
		t.Error(err)
	}
	if d.Status.HeldBy == nil || d.Status.HeldBy.UID != string(vmi.GetUID()) || !d.Status.HeldBy.Since.Equal(&since) {
		t.Errorf("released device heldBy %+v", d.Status.HeldBy)
	}
	if _, err := getRecord(ns, dev.Name); err != nil {
		t.Errorf("usage record of a released device in use: %v", err)
	}
	waitHolder(t, vmi, true)

	// The VMI goes: so do the device and its record.
	remove(t, vmi)
	gone(t, dev)
	gone(t, record)
	waitHolder(t, vmi, false)
	eventually(t, timeout, func() error {
		c, err := getClass(class.Name)
		if err != nil {
			return err
		}
		if c.Status.HeldDevices != 0 {
			return fmt.Errorf("class heldDevices %d, want 0", c.Status.HeldDevices)
		}
		return nil
	})
}

// TestIntegrationHolderChoice names one device from several VMIs: the
// oldest holds it and the others are reported; a VMI being deleted does
// not hold it, and the record follows the holder.
func TestIntegrationHolderChoice(t *testing.T) {
	showLogsOnFailure(t)
	ctx := context.Background()
	ns := namespace(t, "conflict")
	class := newClass("conflict", "nvidia.com/CONFLICT", 1)
	dev := newDevice(ns, "shared", class.Name, 1)
	create(t, class, dev)
	first, second := newVMI(ns, "vm-b", dev.Name, 1), newVMI(ns, "vm-a", dev.Name, 1)
	first.SetFinalizers([]string{"test.xila.us/hold"})
	create(t, first, second)
	// Created in the same second, vm-a is first by name.
	holder, other := first, second
	if second.GetCreationTimestamp().Time.Equal(first.GetCreationTimestamp().Time) {
		holder, other = second, first
	}
	waitDevice(t, ns, dev.Name, heldBy(holder))
	waitEvent(t, ns, dev.Name, controller.EventDeviceConflict, other.GetName(), holder.GetName()+", the oldest")
	eventually(t, timeout, func() error {
		rec, err := getRecord(ns, dev.Name)
		if err != nil {
			return err
		}
		if rec.Data["vmiUID"] != string(holder.GetUID()) {
			return fmt.Errorf("record names %s", rec.Data["vmi"])
		}
		return nil
	})

	// vm-b is deleted but kept by its finalizer: it no longer holds the
	// device.
	remove(t, first)
	if holder == first {
		waitDevice(t, ns, dev.Name, heldBy(second))
		eventually(t, timeout, func() error {
			rec, err := getRecord(ns, dev.Name)
			if err != nil {
				return err
			}
			if rec.Data["vmiUID"] != string(second.GetUID()) {
				return fmt.Errorf("record names %s", rec.Data["vmi"])
			}
			return nil
		})
	}
	// The last live VMI goes: the device is available and its record
	// deleted, though vm-b has not gone yet.
	remove(t, second)
	waitDevice(t, ns, dev.Name, phase(gpuv1alpha1.GPUDeviceAvailable, controller.ReasonValid))
	waitEvent(t, ns, dev.Name, controller.EventDeviceReleased, "no longer holds")
	eventually(t, timeout, func() error {
		if _, err := getRecord(ns, dev.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("usage record of an available device: %v", err)
		}
		return nil
	})

	// Deleting the device now waits for vm-b, which still names it.
	remove(t, dev)
	waitDevice(t, ns, dev.Name, func(d *gpuv1alpha1.GPUDevice) error {
		if err := phase(gpuv1alpha1.GPUDeviceReleased, controller.ReasonReleased)(d); err != nil {
			return err
		}
		if d.Status.HeldBy == nil || d.Status.HeldBy.UID != string(first.GetUID()) {
			return fmt.Errorf("released device heldBy %+v, want vm-b", d.Status.HeldBy)
		}
		return nil
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
			return err
		}
		first.SetFinalizers(nil)
		return k8s.Update(ctx, first)
	}); err != nil {
		t.Fatal(err)
	}
	gone(t, dev)
	eventually(t, timeout, func() error {
		if _, err := getRecord(ns, dev.Name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("usage record of a deleted device: %v", err)
		}
		return nil
	})
}

// TestIntegrationInvalidDevices orders devices of a missing class and more
// devices than the class sells; neither is held by the VMI that names it,
// and the first becomes valid once its class exists.
func TestIntegrationInvalidDevices(t *testing.T) {
	showLogsOnFailure(t)
	ns := namespace(t, "invalid")
	small := newClass("invalid-small", "nvidia.com/INVALID_SMALL", 2)
	orphan := newDevice(ns, "orphan", "invalid-late", 1)
	greedy := newDevice(ns, "greedy", small.Name, 3)
	create(t, small, orphan, greedy)
	vmi := newVMI(ns, "vm", greedy.Name, 3)
	create(t, vmi)

	d := waitDevice(t, ns, orphan.Name, phase(gpuv1alpha1.GPUDeviceInvalid, controller.ReasonClassNotFound))
	if err := hasFinalizer(d, gpuv1alpha1.FinalizerDevice); err != nil {
		t.Error(err)
	}
	waitEvent(t, ns, orphan.Name, controller.EventDeviceInvalid, controller.ReasonClassNotFound, "invalid-late")
	d = waitDevice(t, ns, greedy.Name, phase(gpuv1alpha1.GPUDeviceInvalid, controller.ReasonCountExceedsClass))
	if d.Status.HeldBy != nil {
		t.Errorf("an invalid device is held: %+v", d.Status.HeldBy)
	}
	waitEvent(t, ns, greedy.Name, controller.EventDeviceInvalid, "count 3 exceeds maxCount 2")
	if _, err := getRecord(ns, greedy.Name); !apierrors.IsNotFound(err) {
		t.Errorf("usage record of an invalid device: %v", err)
	}

	create(t, newClass("invalid-late", "nvidia.com/INVALID_LATE", 1))
	waitDevice(t, ns, orphan.Name, phase(gpuv1alpha1.GPUDeviceAvailable, controller.ReasonValid))
}

// TestIntegrationTemplateDevices runs a VMI that orders its device through
// the device template: the controller creates the device, the VMI holds
// it, and the device goes with the VMI. A template device whose VMI does
// not exist is deleted too.
func TestIntegrationTemplateDevices(t *testing.T) {
	showLogsOnFailure(t)
	ns := namespace(t, "template")
	class := newClass("template", "nvidia.com/TEMPLATE", 4)
	create(t, class)
	// A VMI without the annotation orders nothing; it is created first,
	// so the controller has seen it once it has handled the next one.
	plain := newVMI(ns, "vm-plain", "plain-gpu", 1)
	create(t, plain)
	vmi := newVMI(ns, "vm-t", "vm-t-gpu", 2)
	vmi.SetAnnotations(map[string]string{gpuv1alpha1.AnnotationDeviceClass: class.Name})
	create(t, vmi)

	d := waitDevice(t, ns, "vm-t-gpu", heldBy(vmi))
	if _, err := getDevice(ns, "plain-gpu"); !apierrors.IsNotFound(err) {
		t.Errorf("a device was ordered without a template: %v", err)
	}
	if d.Labels[gpuv1alpha1.LabelTemplateDevice] != "vm-t" || d.Spec.ClassName != class.Name || d.Spec.Count != 2 {
		t.Errorf("template device labels %v spec %+v", d.Labels, d.Spec)
	}
	waitEvent(t, ns, "vm-t-gpu", controller.EventTemplateDeviceCreated, "2 devices of class template", "vm-t")
	eventually(t, timeout, func() error {
		_, err := getRecord(ns, "vm-t-gpu")
		return err
	})

	remove(t, vmi)
	gone(t, d)
	eventually(t, timeout, func() error {
		if _, err := getRecord(ns, "vm-t-gpu"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("usage record of a deleted template device: %v", err)
		}
		return nil
	})

	// A template device left over from a VMI that does not exist.
	leftover := newDevice(ns, "leftover", class.Name, 1)
	leftover.Labels = map[string]string{gpuv1alpha1.LabelTemplateDevice: "vm-never"}
	create(t, leftover)
	gone(t, leftover)
}

// TestIntegrationClassDeletion deletes a class that devices name: it waits,
// its devices that were not held turn invalid, a held one stays held while
// its VMI does, and the class goes with its last device.
func TestIntegrationClassDeletion(t *testing.T) {
	showLogsOnFailure(t)
	ns := namespace(t, "classdelete")
	class := newClass("classdelete", "nvidia.com/CLASS_DELETE", 1)
	idle, held := newDevice(ns, "idle", class.Name, 1), newDevice(ns, "held", class.Name, 1)
	create(t, class, idle, held)
	vmi := newVMI(ns, "vm", held.Name, 1)
	create(t, vmi)
	waitDevice(t, ns, idle.Name, phase(gpuv1alpha1.GPUDeviceAvailable, controller.ReasonValid))
	waitDevice(t, ns, held.Name, heldBy(vmi))
	eventually(t, timeout, func() error {
		c, err := getClass(class.Name)
		if err != nil {
			return err
		}
		return hasFinalizer(c, gpuv1alpha1.FinalizerClass)
	})

	remove(t, class)
	eventually(t, timeout, func() error {
		c, err := getClass(class.Name)
		if err != nil {
			return err
		}
		r := meta.FindStatusCondition(c.Status.Conditions, controller.ConditionReady)
		if c.DeletionTimestamp == nil || r == nil || r.Reason != controller.ReasonDeleting || !strings.Contains(r.Message, "2 devices") {
			return fmt.Errorf("deleting class: Ready %+v", r)
		}
		return hasFinalizer(c, gpuv1alpha1.FinalizerClass)
	})
	waitDevice(t, ns, idle.Name, phase(gpuv1alpha1.GPUDeviceInvalid, controller.ReasonClassDeleting))
	waitDevice(t, ns, held.Name, heldBy(vmi))
	// A class being deleted still sells its resource name.
	waitSettings(t, func(names []string) error {
		if !slices.Contains(names, class.Spec.ResourceName) {
			return fmt.Errorf("settings %v lack %s", names, class.Spec.ResourceName)
		}
		return nil
	})

	// Its VMI gone, the held device may not be held again.
	remove(t, vmi)
	waitDevice(t, ns, held.Name, phase(gpuv1alpha1.GPUDeviceInvalid, controller.ReasonClassDeleting))
	remove(t, idle)
	gone(t, idle)
	if _, err := getClass(class.Name); err != nil {
		t.Fatalf("class went while a device named it: %v", err)
	}
	remove(t, held)
	gone(t, held)
	gone(t, class)
	waitSettings(t, func(names []string) error {
		if slices.Contains(names, class.Spec.ResourceName) {
			return fmt.Errorf("settings %v still list %s", names, class.Spec.ResourceName)
		}
		return nil
	})
}

// TestIntegrationUsageRecordRepaired deletes and edits the usage record of
// a held device: the controller, its only writer, puts it back.
func TestIntegrationUsageRecordRepaired(t *testing.T) {
	showLogsOnFailure(t)
	ctx := context.Background()
	ns := namespace(t, "repair")
	class := newClass("repair", "nvidia.com/REPAIR", 1)
	dev := newDevice(ns, "gpu", class.Name, 1)
	vmi := newVMI(ns, "vm", dev.Name, 1)
	create(t, class, dev, vmi)
	waitDevice(t, ns, dev.Name, heldBy(vmi))
	var rec *corev1.ConfigMap
	eventually(t, timeout, func() error {
		var err error
		rec, err = getRecord(ns, dev.Name)
		return err
	})
	rec.Data["vmi"] = "someone-else"
	if err := k8s.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	eventually(t, timeout, func() error {
		r, err := getRecord(ns, dev.Name)
		if err != nil {
			return err
		}
		if r.Data["vmi"] != "vm" {
			return fmt.Errorf("record names %q", r.Data["vmi"])
		}
		return nil
	})
	remove(t, rec)
	eventually(t, timeout, func() error {
		r, err := getRecord(ns, dev.Name)
		if err != nil {
			return err
		}
		if r.UID == rec.UID {
			return fmt.Errorf("the old record is still there")
		}
		return nil
	})
}

// TestIntegrationClaimHolders: a VMI that holds a device of a class of
// dynamic resource allocation is listed with the class's DeviceClass in
// the settings' claimHolders, which the webhook reads to hand that
// DeviceClass's claims only to the VMI's launcher pods; it leaves the
// list with its VMI.
func TestIntegrationClaimHolders(t *testing.T) {
	showLogsOnFailure(t)
	ns := namespace(t, "claims")
	class := newClass("claims", "gpu.claims.example.com", 1)
	class.Spec.SourceKind = gpuv1alpha1.GPUSourceResourceClaim
	dev := newDevice(ns, "gpu", class.Name, 1)
	create(t, class, dev)
	vmi := newVMI(ns, "vm", dev.Name, 1)
	create(t, vmi)
	entry := gpuv1alpha1.ClaimHolder(ns, string(vmi.GetUID()), class.Spec.ResourceName)
	claimHolders := func(want bool) func() error {
		return func() error {
			s, err := settings()
			if err != nil {
				return err
			}
			if !slices.Contains(s.DeviceClasses, class.Spec.ResourceName) {
				return fmt.Errorf("settings deviceClasses %v lack %s", s.DeviceClasses, class.Spec.ResourceName)
			}
			if got := slices.Contains(s.ClaimHolders, entry); got != want {
				return fmt.Errorf("settings claimHolders %v list %s: %t, want %t", s.ClaimHolders, entry, got, want)
			}
			return nil
		}
	}
	eventually(t, timeout, claimHolders(true))
	remove(t, vmi)
	eventually(t, timeout, claimHolders(false))
}
