package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func TestChooseHolder(t *testing.T) {
	old := User{Name: "old", UID: "u-old", Created: t0}
	young := User{Name: "young", UID: "u-young", Created: t0.Add(time.Minute)}
	twinA := User{Name: "a", UID: "u-a", Created: t0}
	twinB := User{Name: "b", UID: "u-b", Created: t0}
	going := User{Name: "going", UID: "u-going", Created: t0.Add(-time.Hour), Deleting: true}
	cases := []struct {
		name       string
		users      []User
		released   bool
		wantHolder string
		wantOthers []string
	}{
		{name: "nobody"},
		{name: "one", users: []User{young}, wantHolder: "young"},
		{name: "oldest holds", users: []User{young, old}, wantHolder: "old", wantOthers: []string{"young"}},
		{name: "same age: by name", users: []User{twinB, twinA}, wantHolder: "a", wantOthers: []string{"b"}},
		{name: "a VMI being deleted does not hold", users: []User{going, young}, wantHolder: "young"},
		{name: "only a VMI being deleted", users: []User{going}},
		{name: "released: the live VMI first", users: []User{going, young}, released: true, wantHolder: "young", wantOthers: []string{"going"}},
		{name: "released: a VMI being deleted still holds", users: []User{going}, released: true, wantHolder: "going"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			holder, others := ChooseHolder(tc.users, tc.released)
			got := ""
			if holder != nil {
				got = holder.Name
			}
			if got != tc.wantHolder {
				t.Errorf("holder %q, want %q", got, tc.wantHolder)
			}
			var names []string
			for _, o := range others {
				names = append(names, o.Name)
			}
			if diff := cmp.Diff(tc.wantOthers, names); diff != "" {
				t.Errorf("others (-want +got):\n%s", diff)
			}
		})
	}
}

func class(name string, maxCount int32, deleting bool) *gpuv1alpha1.GPUClass {
	c := &gpuv1alpha1.GPUClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gpuv1alpha1.GPUClassSpec{ResourceName: "nvidia.com/" + name, MaxCount: maxCount}}
	if deleting {
		c.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return c
}

func device(className string, count int32, phase gpuv1alpha1.GPUDevicePhase, deleting bool) *gpuv1alpha1.GPUDevice {
	d := &gpuv1alpha1.GPUDevice{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "gpu", Generation: 3},
		Spec: gpuv1alpha1.GPUDeviceSpec{ClassName: className, Count: count}, Status: gpuv1alpha1.GPUDeviceStatus{Phase: phase}}
	if deleting {
		d.DeletionTimestamp = &metav1.Time{Time: t0}
	}
	return d
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name         string
		dev          *gpuv1alpha1.GPUDevice
		class        *gpuv1alpha1.GPUClass
		held         bool
		wantPhase    gpuv1alpha1.GPUDevicePhase
		wantReason   string
		wantResource string
	}{
		{name: "available", dev: device("h100", 1, "", false), class: class("h100", 1, false),
			wantPhase: gpuv1alpha1.GPUDeviceAvailable, wantReason: ReasonValid, wantResource: "nvidia.com/h100"},
		{name: "held", dev: device("h100", 2, gpuv1alpha1.GPUDeviceAvailable, false), class: class("h100", 4, false), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceHeld, wantReason: ReasonValid, wantResource: "nvidia.com/h100"},
		{name: "count defaults to one, maxCount too", dev: device("h100", 0, "", false), class: class("h100", 0, false),
			wantPhase: gpuv1alpha1.GPUDeviceAvailable, wantReason: ReasonValid, wantResource: "nvidia.com/h100"},
		{name: "class missing", dev: device("h100", 1, gpuv1alpha1.GPUDeviceAvailable, false), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceInvalid, wantReason: ReasonClassNotFound},
		{name: "class deleting", dev: device("h100", 1, gpuv1alpha1.GPUDeviceAvailable, false), class: class("h100", 1, true), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceInvalid, wantReason: ReasonClassDeleting, wantResource: "nvidia.com/h100"},
		{name: "class deleting, already held", dev: device("h100", 1, gpuv1alpha1.GPUDeviceHeld, false), class: class("h100", 1, true), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceHeld, wantReason: ReasonValid, wantResource: "nvidia.com/h100"},
		{name: "class deleting, holder gone", dev: device("h100", 1, gpuv1alpha1.GPUDeviceHeld, false), class: class("h100", 1, true),
			wantPhase: gpuv1alpha1.GPUDeviceInvalid, wantReason: ReasonClassDeleting, wantResource: "nvidia.com/h100"},
		{name: "count exceeds class", dev: device("h100", 3, "", false), class: class("h100", 2, false), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceInvalid, wantReason: ReasonCountExceedsClass, wantResource: "nvidia.com/h100"},
		{name: "released", dev: device("h100", 1, gpuv1alpha1.GPUDeviceHeld, true), class: class("h100", 1, false), held: true,
			wantPhase: gpuv1alpha1.GPUDeviceReleased, wantReason: ReasonReleased, wantResource: "nvidia.com/h100"},
		{name: "released, class gone, keeps the resource name", dev: func() *gpuv1alpha1.GPUDevice {
			d := device("h100", 1, gpuv1alpha1.GPUDeviceHeld, true)
			d.Status.ResourceName = "nvidia.com/old"
			return d
		}(), wantPhase: gpuv1alpha1.GPUDeviceReleased, wantReason: ReasonReleased, wantResource: "nvidia.com/old"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := Judge(tc.dev, tc.class, tc.held)
			if j.Phase != tc.wantPhase || j.Reason != tc.wantReason || j.ResourceName != tc.wantResource {
				t.Errorf("judgement %+v, want phase %s reason %s resource %q", j, tc.wantPhase, tc.wantReason, tc.wantResource)
			}
			if j.Message == "" {
				t.Error("judgement without message")
			}
		})
	}
}

func TestNextStatus(t *testing.T) {
	holder := &User{Name: "vm", UID: "u-1", Created: t0}
	other := &User{Name: "vm2", UID: "u-2", Created: t0}
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	now := t0.Add(1500 * time.Millisecond)
	held := Judgement{Phase: gpuv1alpha1.GPUDeviceHeld, Reason: ReasonValid, Message: "ok", ResourceName: "nvidia.com/x"}
	withHolder := func(uid string) *gpuv1alpha1.GPUDevice {
		d := device("x", 1, gpuv1alpha1.GPUDeviceHeld, false)
		d.Status.HeldBy = &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: uid, Since: earlier}
		return d
	}
	cases := []struct {
		name        string
		dev         *gpuv1alpha1.GPUDevice
		j           Judgement
		holder      *User
		wantHeldBy  *gpuv1alpha1.GPUDeviceHolder
		wantReady   metav1.ConditionStatus
		wantPhase   gpuv1alpha1.GPUDevicePhase
		wantGenSeen int64
	}{
		{name: "first seen", dev: device("x", 1, "", false), j: held, holder: holder,
			wantHeldBy: &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: "u-1", Since: metav1.NewTime(t0.Add(time.Second))}, wantReady: metav1.ConditionTrue},
		{name: "same holder keeps since", dev: withHolder("u-1"), j: held, holder: holder,
			wantHeldBy: &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: "u-1", Since: earlier}, wantReady: metav1.ConditionTrue},
		{name: "same name, new UID: new since", dev: withHolder("u-0"), j: held, holder: holder,
			wantHeldBy: &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: "u-1", Since: metav1.NewTime(t0.Add(time.Second))}, wantReady: metav1.ConditionTrue},
		{name: "another holder", dev: withHolder("u-1"), j: held, holder: other,
			wantHeldBy: &gpuv1alpha1.GPUDeviceHolder{Name: "vm2", UID: "u-2", Since: metav1.NewTime(t0.Add(time.Second))}, wantReady: metav1.ConditionTrue},
		{name: "no holder: available", dev: withHolder("u-1"), j: Judgement{Phase: gpuv1alpha1.GPUDeviceAvailable, Reason: ReasonValid},
			wantReady: metav1.ConditionTrue},
		{name: "invalid clears the holder", dev: withHolder("u-1"), j: Judgement{Phase: gpuv1alpha1.GPUDeviceInvalid, Reason: ReasonClassDeleting},
			holder: holder, wantReady: metav1.ConditionFalse},
		{name: "released keeps the holder", dev: withHolder("u-1"), j: Judgement{Phase: gpuv1alpha1.GPUDeviceReleased, Reason: ReasonReleased},
			holder: holder, wantHeldBy: &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: "u-1", Since: earlier}, wantReady: metav1.ConditionFalse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := NextStatus(tc.dev, tc.j, tc.holder, now)
			if st.Phase != tc.j.Phase || st.ObservedGeneration != tc.dev.Generation {
				t.Errorf("phase %s generation %d", st.Phase, st.ObservedGeneration)
			}
			if diff := cmp.Diff(tc.wantHeldBy, st.HeldBy, cmpopts.EquateApproxTime(0)); diff != "" {
				t.Errorf("heldBy (-want +got):\n%s", diff)
			}
			c := meta.FindStatusCondition(st.Conditions, ConditionReady)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.j.Reason || c.ObservedGeneration != tc.dev.Generation {
				t.Errorf("Ready %+v, want %s %s", c, tc.wantReady, tc.j.Reason)
			}
		})
	}
}

func TestNextStatusKeepsTransitionTime(t *testing.T) {
	dev := device("x", 1, "", false)
	j := Judgement{Phase: gpuv1alpha1.GPUDeviceAvailable, Reason: ReasonValid, Message: "1 of x"}
	dev.Status = NextStatus(dev, j, nil, t0)
	again := NextStatus(dev, j, nil, t0.Add(time.Hour))
	if diff := cmp.Diff(dev.Status, again); diff != "" {
		t.Errorf("a second judgement changed the status (-first +second):\n%s", diff)
	}
}

func TestResourceNames(t *testing.T) {
	classes := func(names ...string) []gpuv1alpha1.GPUClass {
		out := make([]gpuv1alpha1.GPUClass, len(names))
		for i, n := range names {
			out[i] = gpuv1alpha1.GPUClass{ObjectMeta: metav1.ObjectMeta{Name: "c" + n}, Spec: gpuv1alpha1.GPUClassSpec{ResourceName: n}}
		}
		return out
	}
	cases := []struct {
		name    string
		classes []gpuv1alpha1.GPUClass
		want    string
	}{
		{name: "none", want: ""},
		{name: "one", classes: classes("nvidia.com/H100"), want: "nvidia.com/H100"},
		{name: "sorted", classes: classes("nvidia.com/b", "amd.com/x", "nvidia.com/a"), want: "amd.com/x,nvidia.com/a,nvidia.com/b"},
		{name: "duplicates once", classes: classes("nvidia.com/a", "nvidia.com/b", "nvidia.com/a"), want: "nvidia.com/a,nvidia.com/b"},
		{name: "empty skipped", classes: classes("", "nvidia.com/a"), want: "nvidia.com/a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(ResourceNames(tc.classes), ","); got != tc.want {
				t.Errorf("ResourceNames = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRecordName(t *testing.T) {
	long := strings.Repeat("d", 250)
	dotted := strings.Repeat("a", 225) + "." + strings.Repeat("b", 40)
	cases := []struct {
		name, namespace, device string
		want                    string
	}{
		{name: "short", namespace: "acme", device: "gpu-0", want: "gpu-usage-acme-gpu-0"},
		{name: "exactly 253", namespace: "acme", device: strings.Repeat("d", 253-len("gpu-usage-acme-")),
			want: "gpu-usage-acme-" + strings.Repeat("d", 253-len("gpu-usage-acme-"))},
		{name: "too long", namespace: "acme", device: long},
		{name: "cut at a dot", namespace: "acme", device: dotted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordName(tc.namespace, tc.device)
			if tc.want != "" && got != tc.want {
				t.Errorf("RecordName = %q, want %q", got, tc.want)
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Errorf("RecordName %q is not a ConfigMap name: %v", got, errs)
			}
			// A shortened name already ends with the hash of the pair.
			alt := AltRecordName(tc.namespace, tc.device)
			if shortened := len("gpu-usage-"+tc.namespace+"-"+tc.device) > 253; (alt == got) != shortened {
				t.Errorf("AltRecordName %q, RecordName %q", alt, got)
			}
			if errs := validation.IsDNS1123Subdomain(alt); len(errs) > 0 {
				t.Errorf("AltRecordName %q is not a ConfigMap name: %v", alt, errs)
			}
		})
	}
	if a, b := RecordName("acme", long), RecordName("acme", long+"x"); a == b {
		t.Errorf("two long devices share record name %q", a)
	}
	// gpu-usage-a-b-c is both a/b-c and a-b/c; the alternative names differ.
	if RecordName("a", "b-c") != RecordName("a-b", "c") || AltRecordName("a", "b-c") == AltRecordName("a-b", "c") {
		t.Error("the alternative names of an ambiguous pair do not tell them apart")
	}
}

func TestUsageLabelValue(t *testing.T) {
	cases := []struct {
		name, namespace, device, want string
	}{
		{name: "short", namespace: "acme", device: "gpu-0", want: "acme.gpu-0"},
		{name: "ambiguous names differ", namespace: "a-b", device: "c", want: "a-b.c"},
		{name: "too long", namespace: "acme", device: strings.Repeat("d", 60)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := UsageLabelValue(tc.namespace, tc.device)
			if tc.want != "" && got != tc.want {
				t.Errorf("UsageLabelValue = %q, want %q", got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("%q is not a label value: %v", got, errs)
			}
		})
	}
	if UsageLabelValue("a", "b-c") == UsageLabelValue("a-b", "c") {
		t.Error("two devices share a usage label value")
	}
}

func TestRecordData(t *testing.T) {
	dev := device("h100", 2, gpuv1alpha1.GPUDeviceHeld, false)
	since := metav1.NewTime(time.Date(2026, 3, 1, 11, 0, 0, 0, time.FixedZone("CET", 3600)))
	got := RecordData(dev, &gpuv1alpha1.GPUDeviceHolder{Name: "vm", UID: "u-1", Since: since}, "nvidia.com/h100")
	want := map[string]string{"namespace": "acme", "device": "gpu", "class": "h100", "resourceName": "nvidia.com/h100",
		"count": "2", "vmi": "vm", "vmiUID": "u-1", "since": "2026-03-01T10:00:00Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record data (-want +got):\n%s", diff)
	}
	if !recordOf(got, "acme", "gpu") || recordOf(got, "acme", "gpu-2") {
		t.Error("recordOf does not match the record to its device")
	}
}

func TestHolders(t *testing.T) {
	device := func(ns, name string, phase gpuv1alpha1.GPUDevicePhase, holder string) gpuv1alpha1.GPUDevice {
		d := gpuv1alpha1.GPUDevice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: gpuv1alpha1.GPUDeviceStatus{Phase: phase}}
		if holder != "" {
			d.Status.HeldBy = &gpuv1alpha1.GPUDeviceHolder{Name: "vm-" + holder, UID: holder}
		}
		return d
	}
	cases := []struct {
		name    string
		devices []gpuv1alpha1.GPUDevice
		want    string
	}{
		{name: "none", want: ""},
		{name: "free devices hold nothing", devices: []gpuv1alpha1.GPUDevice{device("acme", "a", gpuv1alpha1.GPUDeviceAvailable, ""), device("acme", "b", gpuv1alpha1.GPUDeviceInvalid, "")}, want: ""},
		{name: "held and released, by namespace and UID, sorted",
			devices: []gpuv1alpha1.GPUDevice{device("zeta", "a", gpuv1alpha1.GPUDeviceHeld, "u2"), device("acme", "b", gpuv1alpha1.GPUDeviceReleased, "u9"), device("acme", "c", gpuv1alpha1.GPUDeviceHeld, "u1")},
			want:    "acme/u1,acme/u9,zeta/u2"},
		{name: "a VMI holding two devices once", devices: []gpuv1alpha1.GPUDevice{device("acme", "a", gpuv1alpha1.GPUDeviceHeld, "u1"), device("acme", "b", gpuv1alpha1.GPUDeviceHeld, "u1")}, want: "acme/u1"},
		{name: "the same UID in two namespaces twice", devices: []gpuv1alpha1.GPUDevice{device("a", "x", gpuv1alpha1.GPUDeviceHeld, "u1"), device("b", "x", gpuv1alpha1.GPUDeviceHeld, "u1")}, want: "a/u1,b/u1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(Holders(tc.devices), ","); got != tc.want {
				t.Errorf("Holders = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeviceClassesAndClaimHolders(t *testing.T) {
	class := func(name string, kind gpuv1alpha1.GPUSourceKind, resource string) gpuv1alpha1.GPUClass {
		return gpuv1alpha1.GPUClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gpuv1alpha1.GPUClassSpec{SourceKind: kind, ResourceName: resource}}
	}
	classes := []gpuv1alpha1.GPUClass{
		class("dra-b", gpuv1alpha1.GPUSourceResourceClaim, "gpu.example.com"),
		class("host", gpuv1alpha1.GPUSourceHostDevice, "nvidia.com/GH100"),
		class("dra-a", gpuv1alpha1.GPUSourceResourceClaim, "a.example.com"),
		class("dra-a2", gpuv1alpha1.GPUSourceResourceClaim, "a.example.com"),
		class("default-kind", "", "nvidia.com/other"),
	}
	if got, want := strings.Join(DeviceClasses(classes), ","), "a.example.com,gpu.example.com"; got != want {
		t.Errorf("DeviceClasses = %q, want %q", got, want)
	}
	device := func(ns, name, class, resource, holder string) gpuv1alpha1.GPUDevice {
		d := gpuv1alpha1.GPUDevice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gpuv1alpha1.GPUDeviceSpec{ClassName: class},
			Status: gpuv1alpha1.GPUDeviceStatus{Phase: gpuv1alpha1.GPUDeviceHeld, ResourceName: resource}}
		if holder != "" {
			d.Status.HeldBy = &gpuv1alpha1.GPUDeviceHolder{Name: "vm-" + holder, UID: holder}
		} else {
			d.Status.Phase = gpuv1alpha1.GPUDeviceAvailable
		}
		return d
	}
	devices := []gpuv1alpha1.GPUDevice{
		device("zeta", "a", "dra-b", "gpu.example.com", "u2"),
		device("acme", "b", "dra-a", "a.example.com", "u1"),
		device("acme", "c", "dra-a2", "a.example.com", "u1"),      // the same holder and DeviceClass once
		device("acme", "d", "host", "nvidia.com/GH100", "u3"),     // not of dynamic resource allocation
		device("acme", "e", "dra-b", "gpu.example.com", ""),       // held by none
		device("acme", "f", "missing", "gpu.example.com", "u4"),   // of no class
		device("acme", "g", "dra-b", "", "u5"),                    // not judged yet
		device("acme", "h", "default-kind", "nvidia.com/x", "u6"), // host devices by default
	}
	if got, want := strings.Join(ClaimHolders(classes, devices), ","), "acme/u1=a.example.com,zeta/u2=gpu.example.com"; got != want {
		t.Errorf("ClaimHolders = %q, want %q", got, want)
	}
	if got := ClaimHolders(nil, devices); got != nil {
		t.Errorf("ClaimHolders without classes = %q, want none", got)
	}
}
