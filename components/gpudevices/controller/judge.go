package controller

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

// ConditionReady is the condition type of classes and devices.
const ConditionReady = "Ready"

// Reasons of the Ready condition of a device.
const (
	// ReasonValid: the order is valid against its class.
	ReasonValid = "Valid"
	// ReasonClassNotFound: the class the device names does not exist.
	ReasonClassNotFound = "ClassNotFound"
	// ReasonClassDeleting: the class is being deleted and the device was
	// not held when it started.
	ReasonClassDeleting = "ClassDeleting"
	// ReasonCountExceedsClass: the device counts more than the class's
	// maxCount.
	ReasonCountExceedsClass = "CountExceedsClass"
	// ReasonReleased: the device is being deleted.
	ReasonReleased = "Released"
)

// Reasons of the Ready condition of a class.
const (
	// ReasonProtected: the class carries its finalizer.
	ReasonProtected = "Protected"
	// ReasonDeleting: the class is being deleted and waits for the devices
	// that name it.
	ReasonDeleting = "Deleting"
)

// User is a VMI whose device label names a device.
type User struct {
	Name     string
	UID      types.UID
	Created  time.Time
	Deleting bool
}

// ChooseHolder picks the VMI that holds a device among the VMIs that name
// it, and returns the other candidates. The candidates are the users not
// being deleted; the oldest by creation time, then name, holds the device.
// A released device (being deleted) is still held by whoever uses it: then
// users being deleted are candidates too, after the others.
func ChooseHolder(users []User, released bool) (*User, []User) {
	var candidates []User
	for _, u := range users {
		if !u.Deleting || released {
			candidates = append(candidates, u)
		}
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	slices.SortFunc(candidates, func(a, b User) int {
		if a.Deleting != b.Deleting {
			if a.Deleting {
				return 1
			}
			return -1
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	holder := candidates[0]
	return &holder, candidates[1:]
}

// Judgement is what a device is, judged against its class.
type Judgement struct {
	Phase        gpuv1alpha1.GPUDevicePhase
	Reason       string
	Message      string
	ResourceName string
}

// Judge judges a device against its class (nil when it does not exist);
// held tells whether a VMI holds it now.
func Judge(dev *gpuv1alpha1.GPUDevice, class *gpuv1alpha1.GPUClass, held bool) Judgement {
	if !dev.DeletionTimestamp.IsZero() {
		j := Judgement{Phase: gpuv1alpha1.GPUDeviceReleased, Reason: ReasonReleased, ResourceName: dev.Status.ResourceName}
		if class != nil {
			j.ResourceName = class.Spec.ResourceName
		}
		if held {
			j.Message = "the device is being deleted and waits until no VMI uses it"
		} else {
			j.Message = "the device is being deleted"
		}
		return j
	}
	switch {
	case class == nil:
		return Judgement{Phase: gpuv1alpha1.GPUDeviceInvalid, Reason: ReasonClassNotFound,
			Message: fmt.Sprintf("GPUClass %q does not exist", dev.Spec.ClassName)}
	case !class.DeletionTimestamp.IsZero() && !(held && dev.Status.Phase == gpuv1alpha1.GPUDeviceHeld):
		return Judgement{Phase: gpuv1alpha1.GPUDeviceInvalid, Reason: ReasonClassDeleting, ResourceName: class.Spec.ResourceName,
			Message: fmt.Sprintf("GPUClass %q is being deleted", class.Name)}
	case DeviceCount(dev) > MaxCount(class):
		return Judgement{Phase: gpuv1alpha1.GPUDeviceInvalid, Reason: ReasonCountExceedsClass, ResourceName: class.Spec.ResourceName,
			Message: fmt.Sprintf("count %d exceeds maxCount %d of GPUClass %q", DeviceCount(dev), MaxCount(class), class.Name)}
	}
	j := Judgement{Phase: gpuv1alpha1.GPUDeviceAvailable, Reason: ReasonValid, ResourceName: class.Spec.ResourceName,
		Message: fmt.Sprintf("%d of %s", DeviceCount(dev), class.Spec.ResourceName)}
	if held {
		j.Phase = gpuv1alpha1.GPUDeviceHeld
	}
	return j
}

// DeviceCount is the count a device orders; the API defaults it to 1.
func DeviceCount(dev *gpuv1alpha1.GPUDevice) int32 { return max(dev.Spec.Count, 1) }

// MaxCount is the most devices one order of the class may hold; the API
// defaults it to 1.
func MaxCount(class *gpuv1alpha1.GPUClass) int32 { return max(class.Spec.MaxCount, 1) }

// NextStatus is the status of a device after a judgement: holder (nil for
// none) holds it when the phase is Held or Released; since is now for a new
// holder and kept while the same VMI holds it.
func NextStatus(dev *gpuv1alpha1.GPUDevice, j Judgement, holder *User, now time.Time) gpuv1alpha1.GPUDeviceStatus {
	old := dev.Status
	st := gpuv1alpha1.GPUDeviceStatus{
		ObservedGeneration: dev.Generation,
		Phase:              j.Phase,
		ResourceName:       j.ResourceName,
		Conditions:         slices.Clone(old.Conditions),
	}
	if holder != nil && (j.Phase == gpuv1alpha1.GPUDeviceHeld || j.Phase == gpuv1alpha1.GPUDeviceReleased) {
		st.HeldBy = &gpuv1alpha1.GPUDeviceHolder{Name: holder.Name, UID: string(holder.UID), Since: metav1.NewTime(now).Rfc3339Copy()}
		if old.HeldBy != nil && old.HeldBy.UID == string(holder.UID) && !old.HeldBy.Since.IsZero() {
			st.HeldBy.Since = old.HeldBy.Since
		}
	}
	status := metav1.ConditionTrue
	if j.Phase == gpuv1alpha1.GPUDeviceInvalid || j.Phase == gpuv1alpha1.GPUDeviceReleased {
		status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionReady, Status: status, Reason: j.Reason,
		Message: j.Message, ObservedGeneration: dev.Generation, LastTransitionTime: metav1.NewTime(now).Rfc3339Copy()})
	return st
}

// ResourceNames are the settings' resourceNames: the resource names of
// the classes, sorted, without duplicates.
func ResourceNames(classes []gpuv1alpha1.GPUClass) []string {
	var names []string
	for i := range classes {
		if n := classes[i].Spec.ResourceName; n != "" {
			names = append(names, n)
		}
	}
	return sortedSet(names)
}

// sortedSet sorts a list and drops its duplicates; nil when empty, as
// the API server returns an empty list.
func sortedSet(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// DeviceClasses are the settings' deviceClasses: the resourceName (a
// DeviceClass) of every class whose devices come from dynamic resource
// allocation, sorted, distinct.
func DeviceClasses(classes []gpuv1alpha1.GPUClass) []string {
	var names []string
	for i := range classes {
		if classes[i].Spec.SourceKind == gpuv1alpha1.GPUSourceResourceClaim && classes[i].Spec.ResourceName != "" {
			names = append(names, classes[i].Spec.ResourceName)
		}
	}
	return sortedSet(names)
}

// ClaimHolders are the settings' claimHolders: for every device
// a VMI holds (Held, or Released while a VMI still uses it) whose class
// comes from dynamic resource allocation,
// <namespace>/<VMI UID>=<DeviceClass> (gpuv1alpha1.ClaimHolder), sorted,
// distinct. The DeviceClass is the one the device was
// judged against (status.resourceName), which a class keeps while it
// protects its devices.
func ClaimHolders(classes []gpuv1alpha1.GPUClass, devices []gpuv1alpha1.GPUDevice) []string {
	claims := map[string]bool{}
	for i := range classes {
		claims[classes[i].Name] = classes[i].Spec.SourceKind == gpuv1alpha1.GPUSourceResourceClaim
	}
	var out []string
	for i := range devices {
		d := &devices[i]
		if h := d.Status.HeldBy; h != nil && h.UID != "" && d.Status.ResourceName != "" && claims[d.Spec.ClassName] {
			out = append(out, gpuv1alpha1.ClaimHolder(d.Namespace, h.UID, d.Status.ResourceName))
		}
	}
	return sortedSet(out)
}

// Holders lists the VMIs that hold a device (Held, or Released while a
// VMI still uses it) as <namespace>/<VMI UID>, sorted and distinct: the
// settings' holders.
func Holders(devices []gpuv1alpha1.GPUDevice) []string {
	var out []string
	for i := range devices {
		if h := devices[i].Status.HeldBy; h != nil && h.UID != "" {
			out = append(out, devices[i].Namespace+"/"+h.UID)
		}
	}
	return sortedSet(out)
}

// Usage records.
const (
	// recordPrefix starts the name of every usage record.
	recordPrefix = "gpu-usage-"
	// maxNameLength is the longest ConfigMap name.
	maxNameLength = 253
	// maxLabelValueLength is the longest label value.
	maxLabelValueLength = 63
	// nameHashLength is how many hex digits of a hash end a shortened
	// name.
	nameHashLength = 16
	// labelHashLength is how many hex digits of a hash stand for a label
	// value that is too long.
	labelHashLength = 40
)

// Keys of a usage record's data.
const (
	RecordKeyNamespace    = "namespace"
	RecordKeyDevice       = "device"
	RecordKeyClass        = "class"
	RecordKeyResourceName = "resourceName"
	RecordKeyCount        = "count"
	RecordKeyVMI          = "vmi"
	RecordKeyVMIUID       = "vmiUID"
	RecordKeySince        = "since"
)

// RecordName is the name of the usage record of a device: gpu-usage-
// <namespace>-<device>, shortened and ended with a hash of both when
// longer than a ConfigMap name may be.
func RecordName(namespace, device string) string {
	name := recordPrefix + namespace + "-" + device
	if len(name) <= maxNameLength {
		return name
	}
	return hashedName(name, namespace, device)
}

// AltRecordName is the name of the usage record of a device whose
// RecordName is taken by the record of another (namespace, device) pair
// (gpu-usage-a-b-c is both a/b-c and a-b/c): RecordName ended with a hash
// of the pair. A RecordName shortened for length already ends with that
// hash and is its own alternative.
func AltRecordName(namespace, device string) string {
	return hashedName(recordPrefix+namespace+"-"+device, namespace, device)
}

func hashedName(name, namespace, device string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + device))
	h := hex.EncodeToString(sum[:])[:nameHashLength]
	if keep := maxNameLength - 1 - len(h); len(name) > keep {
		name = name[:keep]
	}
	return strings.TrimRight(name, "-.") + "-" + h
}

// UsageLabelValue is the LabelUsage value of the record of a device:
// <namespace>.<device>, or a hash of it when longer than a label value
// may be. A namespace has no dot, so the value names one pair; a hash has
// none either, so it is never mistaken for one.
func UsageLabelValue(namespace, device string) string {
	v := namespace + "." + device
	if len(v) <= maxLabelValueLength {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])[:labelHashLength]
}

// RecordData is the data of the usage record of a device held by holder.
func RecordData(dev *gpuv1alpha1.GPUDevice, holder *gpuv1alpha1.GPUDeviceHolder, resourceName string) map[string]string {
	return map[string]string{
		RecordKeyNamespace:    dev.Namespace,
		RecordKeyDevice:       dev.Name,
		RecordKeyClass:        dev.Spec.ClassName,
		RecordKeyResourceName: resourceName,
		RecordKeyCount:        strconv.Itoa(int(DeviceCount(dev))),
		RecordKeyVMI:          holder.Name,
		RecordKeyVMIUID:       holder.UID,
		RecordKeySince:        holder.Since.UTC().Format(time.RFC3339),
	}
}

// recordOf reports whether a ConfigMap's data names the device.
func recordOf(data map[string]string, namespace, device string) bool {
	return data[RecordKeyNamespace] == namespace && data[RecordKeyDevice] == device
}
