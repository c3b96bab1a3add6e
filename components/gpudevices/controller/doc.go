// Package controller holds the GPU controller's reconcilers:
//
//   - classes: the class finalizer, status.heldDevices and Ready;
//   - settings: the GPUSettings the admission policies and the webhook
//     read (resource names, holders, DeviceClasses for VMs);
//   - devices: the device finalizer, the judgement of each device against
//     its class, its holder and its usage record;
//   - template devices: the devices VMIs order through their device
//     template, deleted with their VMI.
//
// VirtualMachineInstances are read as unstructured objects; the package
// does not depend on KubeVirt's Go modules.
package controller

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Reasons of the Events the controller records.
const (
	// EventDeviceHeld: a VMI now holds the device.
	EventDeviceHeld = "DeviceHeld"
	// EventDeviceReleased: the holder let the device go, or the device is
	// being deleted.
	EventDeviceReleased = "DeviceReleased"
	// EventDeviceConflict: several VMIs name the device; one holds it.
	EventDeviceConflict = "DeviceConflict"
	// EventDeviceInvalid: the device is invalid against its class.
	EventDeviceInvalid = "DeviceInvalid"
	// EventTemplateDeviceCreated: the controller ordered a device for a
	// VMI's device template.
	EventTemplateDeviceCreated = "TemplateDeviceCreated"
)

// ManagedBy is the app.kubernetes.io/managed-by value of the ConfigMaps
// the controller writes.
const ManagedBy = "xila-guard-gpudevices"

// LabelManagedBy is the well-known managed-by label key.
const LabelManagedBy = "app.kubernetes.io/managed-by"

// EventRecorder records Events; the events.EventRecorder of client-go
// satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Observer is told what the metrics count.
type Observer interface {
	// DeviceObserved is called with the class and phase of a device after
	// each judgement; key is namespace/name.
	DeviceObserved(key, class, phase string)
	// DeviceGone is called when the device of key no longer exists.
	DeviceGone(key string)
	// ReconcileFailed is called when a reconcile of the named controller
	// returns an error.
	ReconcileFailed(controller string)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) DeviceObserved(string, string, string) {}
func (nopObserver) DeviceGone(string)                     {}
func (nopObserver) ReconcileFailed(string)                {}
