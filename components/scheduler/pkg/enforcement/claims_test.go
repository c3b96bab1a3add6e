package enforcement

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/components/core/devices"
)

// The DRA world of these tests: the example driver publishes, in a pool
// named after each node of acme's pool, gpu-0, which the node's evidence
// names, and gpu-1, which it does not.
const (
	draDriver  = devices.ExampleDriver
	draClass   = "gpu.example.com"
	draModel   = "LATEST-GPU-MODEL"
	draRequest = "gpu"
	// draTimeSlicing is the example driver's configuration that
	// time-slices a GPU.
	draTimeSlicing = `{"apiVersion":"gpu.resource.example.com/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`
)

// draUUID is the uuid of a device of a node, as its slice and its
// evidence both state it.
func draUUID(node, device string) string { return "GPU-" + node + "-" + device }

// draEvidence is an exclusive GPU of a node's evidence, named as DRA
// device device of the node's pool.
func draEvidence(node, device string) v1alpha1.GPUDevice {
	return v1alpha1.GPUDevice{ID: draUUID(node, device), Vendor: "example", Model: draModel, SharingMode: v1alpha1.SharingExclusive,
		DRA: &v1alpha1.DRADeviceRef{Driver: draDriver, Pool: node, Device: device}}
}

// draWorld is acmeWorld whose nodes' evidence names their gpu-0.
func draWorld() world {
	w := acmeWorld()
	for _, s := range w.states {
		s.Spec.Devices = []v1alpha1.GPUDevice{draEvidence(s.Name, "gpu-0")}
	}
	return w
}

// draSlice is the slice of a node's pool: gpu-0 and gpu-1.
func draSlice(node string) *resourcev1.ResourceSlice {
	return fixture.MakeResourceSlice(node, draDriver).
		GPU("gpu-0", draUUID(node, "gpu-0"), draModel).
		GPU("gpu-1", draUUID(node, "gpu-1"), draModel).Obj()
}

// draClaim is a claim of acme's namespace for one GPU, allocated the
// device of a node's pool, and reserved for the pod train.
func draClaim(name, pool, device string) *fixture.ResourceClaimWrapper {
	return fixture.MakeResourceClaim(name, acmeNS).Request(draRequest, draClass, 1).
		Allocate(draRequest, draDriver, pool, device).ReservedFor("train", acmeNS+"-train").
		AllocationConfig(resourcev1.AllocationConfigSourceClass, draDriver, fixture.ExampleSpacePartitioning)
}

// unallocated is a claim of acme's namespace for one GPU, not allocated.
func unallocated(name string) *resourcev1.ResourceClaim {
	return fixture.MakeResourceClaim(name, acmeNS).Request(draRequest, draClass, 1).Obj()
}

// namedClaim makes the pod use an existing claim.
func namedClaim(entry, claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimName: &claim})
	}
}

// templateClaim makes the pod use a claim made from a template; generated
// is the claim the resource claim controller made, "" for none yet.
func templateClaim(entry, template, generated string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: &template})
		if generated != "" {
			p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: entry, ResourceClaimName: &generated})
		}
	}
}

// startDRA puts the objects into the API server and gives the plugin the
// caches of claims and slices that startCaches gives it: the informers
// of the scheduler's factory, the slices indexed by device. It starts the
// factory and waits until the informers have synced.
func startDRA(h *harness, objs ...runtime.Object) {
	h.t.Helper()
	for _, o := range objs {
		must(h.t, h.core.Tracker().Add(o))
	}
	f := h.pl.handle.SharedInformerFactory()
	sliceInformer := f.Resource().V1().ResourceSlices().Informer()
	must(h.t, sliceInformer.AddIndexers(cache.Indexers{slicePoolIndex: slicePoolKeys}))
	h.pl.caches.claims = f.Resource().V1().ResourceClaims().Lister()
	h.pl.caches.slices = sliceInformer.GetIndexer()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(f.Shutdown)
	h.t.Cleanup(cancel)
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			h.t.Fatalf("the informer of %v did not sync", typ)
		}
	}
	// What was put in the API server is in the caches the plugin reads.
	for _, o := range objs {
		switch o := o.(type) {
		case *resourcev1.ResourceClaim:
			if _, err := h.pl.caches.claims.ResourceClaims(o.Namespace).Get(o.Name); err != nil {
				h.t.Fatalf("claim %s/%s is not in the cache: %v", o.Namespace, o.Name, err)
			}
		case *resourcev1.ResourceSlice:
			if _, ok, err := h.pl.caches.slices.GetByKey(o.Name); err != nil || !ok {
				h.t.Fatalf("slice %s is not in the cache: %v", o.Name, err)
			}
		}
	}
}

// boundTo returns the node the API server has the pod on.
func boundTo(h *harness, p *corev1.Pod) string {
	h.t.Helper()
	got, err := h.core.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	must(h.t, err)
	return got.Spec.NodeName
}

// claimGets counts the plugin's reads of claims from the API server.
func claimGets(h *harness) int {
	n := 0
	for _, a := range h.core.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "resourceclaims" {
			n++
		}
	}
	return n
}

// slicedSecondGPU adds a1's gpu-1 to its evidence, time-sliced.
func slicedSecondGPU(w *world) {
	sliced := draEvidence("a1", "gpu-1")
	sliced.SharingMode = v1alpha1.SharingTimeSlicing
	w.states[0].Spec.Devices = append(w.states[0].Spec.Devices, sliced)
}

// TestBindJudgesClaimedDevices: at Bind, every device allocated to a
// protected pod's claims, named by the pod or made from its templates, is
// judged on the node's fresh evidence and the tenant's policy: the
// evidence must name it and agree with its slice, the device must be on
// the node bound, the allocation's configuration must not share it as the
// policy forbids. A refused device binds nothing. A pod without claims is
// not affected.
func TestBindJudgesClaimedDevices(t *testing.T) {
	const never = fwk.UnschedulableAndUnresolvable
	cases := []struct {
		name  string
		world func(w *world)
		// pod gives the pod its claims.
		pod []func(*corev1.Pod)
		// claims are in the API server; slices too, draSlice of a1 and a2
		// when nil.
		claims []*resourcev1.ResourceClaim
		slices []*resourcev1.ResourceSlice
		// between changes the API server's evidence after Filter.
		between func(h *harness)
		bind    want
		// judged are the devices (ids) the evaluator must be asked about,
		// each alone in the node's evidence.
		judged []string
	}{{
		name:   "a named claim of a compliant device: bound",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		judged: []string{draUUID("a1", "gpu-0")},
	}, {
		name:   "a claim made from a template, of a compliant device: bound",
		pod:    []func(*corev1.Pod){templateClaim("gpu", "one-gpu", "train-gpu-x7k2p")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu-x7k2p", "a1", "gpu-0").Obj()},
		judged: []string{draUUID("a1", "gpu-0")},
	}, {
		name: "two claims, one of each kind, both compliant: bound",
		world: func(w *world) {
			w.states[0].Spec.Devices = append(w.states[0].Spec.Devices, draEvidence("a1", "gpu-1"))
		},
		pod: []func(*corev1.Pod){namedClaim("first", "train-gpu"), templateClaim("second", "one-gpu", "train-second-x7k2p")},
		claims: []*resourcev1.ResourceClaim{
			draClaim("train-gpu", "a1", "gpu-0").Obj(), draClaim("train-second-x7k2p", "a1", "gpu-1").Obj(),
		},
		judged: []string{draUUID("a1", "gpu-0"), draUUID("a1", "gpu-1")},
	}, {
		name:   "the exclusive device of a node whose other DRA device is time-sliced: bound, the node judged without its DRA devices",
		world:  slicedSecondGPU,
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		judged: []string{draUUID("a1", "gpu-0")},
	}, {
		name:   "the time-sliced DRA device of that node: refused",
		world:  slicedSecondGPU,
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-1").Obj()},
		bind:   want{never, "TIME_SLICING_FORBIDDEN: device gpu.example.com/a1/gpu-1"},
	}, {
		name:   "a device the evidence does not name: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-1").Obj()},
		bind:   want{never, "DEVICE_EVIDENCE_MISSING: the node's evidence names no device gpu.example.com/a1/gpu-1"},
	}, {
		name: "the evidence no longer names the device at Bind: refused on the fresh evidence",
		pod:  []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		between: func(h *harness) {
			h.guard.put(changed(draWorld().states[0], func(s *v1alpha1.NodeSecurityStateSpec) { s.Devices[0].DRA.Device = "gpu-9" }))
		},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		bind:   want{never, "DEVICE_EVIDENCE_MISSING"},
	}, {
		name: "the second claim, from a template, holds a device the evidence does not name: refused",
		pod:  []func(*corev1.Pod){namedClaim("first", "train-gpu"), templateClaim("second", "one-gpu", "train-second-x7k2p")},
		claims: []*resourcev1.ResourceClaim{
			draClaim("train-gpu", "a1", "gpu-0").Obj(), draClaim("train-second-x7k2p", "a1", "gpu-1").Obj(),
		},
		bind: want{never, "DEVICE_EVIDENCE_MISSING: the node's evidence names no device gpu.example.com/a1/gpu-1"},
	}, {
		name:   "the slice's uuid disagrees with the evidence: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		slices: []*resourcev1.ResourceSlice{fixture.MakeResourceSlice("a1", draDriver).GPU("gpu-0", "GPU-impostor", draModel).Obj()},
		bind:   want{never, `DEVICE_EVIDENCE_MISMATCH: the ResourceSlice's device gpu.example.com/a1/gpu-0 disagrees with the evidence: uuid "GPU-impostor", evidence "GPU-a1-gpu-0"`},
	}, {
		name:   "the slice's model disagrees with the evidence: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		slices: []*resourcev1.ResourceSlice{fixture.MakeResourceSlice("a1", draDriver).GPU("gpu-0", draUUID("a1", "gpu-0"), "OTHER-GPU").Obj()},
		bind:   want{never, `DEVICE_EVIDENCE_MISMATCH: the ResourceSlice's device gpu.example.com/a1/gpu-0 disagrees with the evidence: model "OTHER-GPU"`},
	}, {
		name: "the allocation time-slices the device, which the policy forbids: refused",
		pod:  []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").
			AllocationConfig(resourcev1.AllocationConfigSourceClaim, draDriver, draTimeSlicing).Obj()},
		bind: want{never, "DEVICE_SHARING_FORBIDDEN: a configuration shares the device by TimeSlicing, which policy strict forbids"},
	}, {
		name:  "the allocation time-slices the device, which the policy allows: bound",
		world: func(w *world) { w.policies[0].Spec.GPUSharing = nil },
		pod:   []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").
			AllocationConfig(resourcev1.AllocationConfigSourceClaim, draDriver, draTimeSlicing).Obj()},
		judged: []string{draUUID("a1", "gpu-0")},
	}, {
		name:   "a device on another node than the one bound: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a2", "gpu-0").Obj()},
		bind:   want{never, `DEVICE_UNKNOWN: device gpu.example.com/a2/gpu-0 of claim train-gpu is on node "a2", not a1`},
	}, {
		name:   "a device no slice publishes: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-7").Obj()},
		bind:   want{never, "DEVICE_UNKNOWN: no ResourceSlice publishes device gpu.example.com/a1/gpu-7 of claim train-gpu"},
	}, {
		name: "a device allocated with admin access: refused",
		pod:  []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{func() *resourcev1.ResourceClaim {
			c := draClaim("train-gpu", "a1", "gpu-0").Obj()
			admin := true
			c.Status.Allocation.Devices.Results[0].AdminAccess = &admin
			return c
		}()},
		bind: want{never, "DEVICE_ADMIN_ACCESS"},
	}, {
		name:   "an unallocated claim: refused",
		pod:    []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		claims: []*resourcev1.ResourceClaim{unallocated("train-gpu")},
		bind:   want{never, "DEVICE_UNKNOWN: claim acme-ml/train-gpu is not allocated"},
	}, {
		name:   "the claim of a template not created yet: refused",
		pod:    []func(*corev1.Pod){namedClaim("first", "train-gpu"), templateClaim("second", "one-gpu", "")},
		claims: []*resourcev1.ResourceClaim{draClaim("train-gpu", "a1", "gpu-0").Obj()},
		bind:   want{never, `DEVICE_UNKNOWN: the claim of the pod's template "second" has not been created`},
	}, {
		name: "a claim that does not exist: an error, retried",
		pod:  []func(*corev1.Pod){namedClaim("gpu", "train-gpu")},
		bind: want{fwk.Error, "reading claim acme-ml/train-gpu"},
	}, {
		name: "no claims: bound, whatever the namespace's claims hold",
		claims: []*resourcev1.ResourceClaim{
			draClaim("other-gpu", "a1", "gpu-1").Obj(), draClaim("elsewhere-gpu", "a2", "gpu-0").Obj(), unallocated("idle"),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := draWorld()
			if tc.world != nil {
				tc.world(&w)
			}
			h := w.start(t)
			var objs []runtime.Object
			sl := tc.slices
			if sl == nil {
				sl = []*resourcev1.ResourceSlice{draSlice("a1"), draSlice("a2")}
			}
			for _, s := range sl {
				objs = append(objs, s)
			}
			for _, c := range tc.claims {
				objs = append(objs, c)
			}
			startDRA(h, objs...)

			p := pod(acmeNS, "train")
			for _, f := range tc.pod {
				f(p)
			}
			c := h.schedule(p)
			if s := c.filter["a1"]; !s.IsSuccess() {
				t.Fatalf("Filter refused a1: %v", s)
			}
			if tc.between != nil {
				tc.between(h)
			}
			asked := len(h.eval.asked())
			h.core.ClearActions()
			check(t, "bind a1", h.bind(c, p, "a1"), tc.bind)

			bound := boundTo(h, p)
			switch {
			case tc.bind.code == fwk.Success && bound != "a1":
				t.Errorf("the pod is on node %q after the bind succeeded, want a1", bound)
			case tc.bind.code != fwk.Success && bound != "":
				t.Errorf("the pod is on node %q after the bind was refused", bound)
			}
			if b, _ := podBindings(h, p); tc.bind.code != fwk.Success && len(b) != 0 {
				t.Errorf("%d bindings sent for a refused pod", len(b))
			}
			// The device is judged by the evaluator on the node's evidence
			// narrowed to it.
			var judged []string
			for _, req := range h.eval.asked()[asked:] {
				if n := req.Nodes; len(n) == 1 && n[0].State != nil && len(n[0].State.Devices) == 1 && n[0].State.Devices[0].DRA != nil {
					judged = append(judged, n[0].State.Devices[0].ID)
				}
			}
			for _, id := range tc.judged {
				if !slices.Contains(judged, id) {
					t.Errorf("devices judged by the evaluator: %v, want %s among them", judged, id)
				}
			}
			if tc.pod == nil && claimGets(h) != 0 {
				t.Errorf("%d reads of claims for a pod without claims", claimGets(h))
			}
		})
	}
}

// TestBindReadsAllocationFromAPIServer: the DynamicResources plugin
// writes the allocation at PreBind, a moment before Bind, so a claim the
// cache has unallocated, or does not have yet, is read from the API
// server and its allocation there is judged. A claim the cache has
// allocated is judged as cached, without a read.
func TestBindReadsAllocationFromAPIServer(t *testing.T) {
	const never = fwk.UnschedulableAndUnresolvable
	cases := []struct {
		name string
		// cached is the claim in the plugin's cache, nil for none; api the
		// one in the API server.
		cached, api *resourcev1.ResourceClaim
		bind        want
		reads       int
	}{{
		name:   "cached unallocated, allocated a compliant device in the API server: bound",
		cached: unallocated("train-gpu"), api: draClaim("train-gpu", "a1", "gpu-0").Obj(),
		reads: 1,
	}, {
		name:   "cached unallocated, allocated a device without evidence in the API server: refused",
		cached: unallocated("train-gpu"), api: draClaim("train-gpu", "a1", "gpu-1").Obj(),
		bind: want{never, "DEVICE_EVIDENCE_MISSING"}, reads: 1,
	}, {
		name: "not cached yet, allocated a compliant device in the API server: bound",
		api:  draClaim("train-gpu", "a1", "gpu-0").Obj(),
		// The read of a claim the cache does not have.
		reads: 1,
	}, {
		name: "not cached yet, allocated a device on another node in the API server: refused",
		api:  draClaim("train-gpu", "a2", "gpu-0").Obj(),
		bind: want{never, "DEVICE_UNKNOWN"}, reads: 1,
	}, {
		name:   "unallocated in the cache and in the API server: refused",
		cached: unallocated("train-gpu"), api: unallocated("train-gpu"),
		bind: want{never, "is not allocated"}, reads: 1,
	}, {
		name:   "cached allocated: the cache is judged, no read",
		cached: draClaim("train-gpu", "a1", "gpu-0").Obj(), api: draClaim("train-gpu", "a1", "gpu-1").Obj(),
		reads: 0,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := draWorld().start(t)
			startDRA(h, draSlice("a1"), draSlice("a2"), tc.api)
			// The cache lags the API server.
			idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			if tc.cached != nil {
				must(t, idx.Add(tc.cached))
			}
			h.pl.caches.claims = resourcelisters.NewResourceClaimLister(idx)

			p := pod(acmeNS, "train")
			namedClaim("gpu", "train-gpu")(p)
			c := h.schedule(p)
			h.core.ClearActions()
			check(t, "bind a1", h.bind(c, p, "a1"), tc.bind)
			if n := claimGets(h); n != tc.reads {
				t.Errorf("%d reads of the claim from the API server, want %d", n, tc.reads)
			}
			if bound := boundTo(h, p); (bound == "a1") != (tc.bind.code == fwk.Success) {
				t.Errorf("the pod is on node %q after the bind returned %v", bound, tc.bind.code)
			}
		})
	}
}

// TestClaimsOf names the claims of a pod: those it names, and those made
// from its templates as its status records them.
func TestClaimsOf(t *testing.T) {
	p := pod(acmeNS, "train")
	namedClaim("a", "shared-gpu")(p)
	templateClaim("b", "one-gpu", "train-b-x7k2p")(p)
	templateClaim("c", "one-gpu", "train-c-q9z4r")(p)
	got, err := claimsOf(p)
	if err != nil || !slices.Equal(got, []string{"shared-gpu", "train-b-x7k2p", "train-c-q9z4r"}) {
		t.Errorf("claimsOf = %v, %v; want shared-gpu, train-b-x7k2p, train-c-q9z4r", got, err)
	}
	// The status of another entry does not stand for the template's claim.
	q := pod(acmeNS, "train")
	templateClaim("b", "one-gpu", "")(q)
	q.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "other", ResourceClaimName: new("train-other")}}
	if got, err := claimsOf(q); err == nil {
		t.Errorf("claimsOf = %v for a template whose claim was not created, want an error", got)
	}
	if got, err := claimsOf(pod(acmeNS, "train")); err != nil || len(got) != 0 {
		t.Errorf("claimsOf = %v, %v for a pod without claims", got, err)
	}
}

// TestSliceDeviceNewestGeneration: a device published by two
// generations of its pool is the newest generation's.
func TestSliceDeviceNewestGeneration(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{slicePoolIndex: slicePoolKeys})
	old := fixture.MakeResourceSlice("a1", draDriver).GPU("gpu-0", "GPU-old", draModel).Obj()
	old.Name = "a1-old"
	cur := fixture.MakeResourceSlice("a1", draDriver).GPU("gpu-0", "GPU-new", draModel).Obj()
	cur.Spec.Pool.Generation = 2
	for _, s := range []*resourcev1.ResourceSlice{cur, old} {
		must(t, idx.Add(s))
	}
	c := &caches{slices: idx}
	// The index hands the slices out in no set order: look often enough
	// that each comes first.
	for range 64 {
		s, d := c.sliceDevice(devices.Key{Driver: draDriver, Pool: "a1", Device: "gpu-0"})
		if d == nil {
			t.Fatal("sliceDevice found no gpu-0, want the one of generation 2")
		}
		if uuid := *d.Attributes["uuid"].StringValue; s.Name != cur.Name || uuid != "GPU-new" {
			t.Fatalf("sliceDevice found gpu-0 (uuid %s) in slice %s of generation %d, want the one of generation 2", uuid, s.Name, s.Spec.Pool.Generation)
		}
	}
	if _, d := c.sliceDevice(devices.Key{Driver: draDriver, Pool: "a1", Device: "gpu-1"}); d != nil {
		t.Errorf("sliceDevice found %v, a device no slice publishes", d)
	}
	if _, d := c.sliceDevice(devices.Key{Driver: "other.example.com", Pool: "a1", Device: "gpu-0"}); d != nil {
		t.Errorf("sliceDevice found %v of another driver", d)
	}
}
