//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/xila-guard/xila-guard/components/api/fixture"
	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
	"github.com/xila-guard/xila-guard/e2e/lab"
)

const (
	// attesterLabel puts a worker under an attester (the chart's
	// confidential.attester.nodeSelector in attest-values.yaml); removing
	// it stops the node's attester.
	attesterLabel = "e2e.xila.us/attester"
	// attestedWorker states the allowed measurement, tamperedWorker
	// another one.
	attestedWorker = 0
	tamperedWorker = 1
	// maxAttestationAge is the policy's bound on a verdict's age: the
	// controller attests every 5s (attest-values.yaml), so only a node
	// whose attester stopped grows this old.
	maxAttestationAge = 15 * time.Second
)

var (
	allowedMeasurement  = v1alpha1.Measurement(lab.LabMeasurement("xila-guard e2e confidential workload v1"))
	tamperedMeasurement = v1alpha1.Measurement(lab.LabMeasurement("xila-guard e2e confidential workload v1, patched"))
)

type attestedKey struct{}

func attestedFrom(ctx context.Context, t *testing.T) *tenantPool {
	return poolFrom(ctx, t, attestedKey{})
}

// TestAttestation installs the attestation controller and lab attesters
// with the controlled scheduler (production profile: attested evidence is
// no lab stand-in, the lab chain is) and checks the attested path end to
// end: each worker's state is written from its verified report; a pod
// whose policy requires the allowed measurement lands only on the worker
// that states it, and a pod pinned to the worker that states another is
// refused; a worker whose attester stops grows stale and is refused; an
// attester tampered with to state another measurement refuses new pods;
// and a controller switched to the production profile refuses the lab
// chain as TEST_ROOT_OF_TRUST. On the way it checks the key broker: a
// tenant's pod on the attested worker gets the tenant's key; its token
// replayed from another node is PEER_MISMATCH; another tenant's pod on the
// same worker is KEY_NOT_OWNED; while the worker's attestation is stale
// the running pod is ATTESTATION_STALE, and once the worker is attested
// anew NODE_CHANGED, while a pod bound after gets the key. A pod that
// Volcano's binder binds to the attested worker gets the key as well (the
// webhook records the evidence it judged the binding on), and its binding
// to the tampered worker is refused. Once the attester is back, the
// tenant's VM migrates (migrationSteps) on the same release, which has
// confidential.vmMigrations on.
func TestAttestation(t *testing.T) {
	f := features.New("attested evidence: lab TEE, verified reports, attestation-gated placement").
		Setup(installAttestation).
		Assess("G-ATTESTED-EVIDENCE each worker's state comes from its verified report", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			for i, w := range a.workers {
				node, err := cs.CoreV1().Nodes().Get(ctx, w, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// A measurement the reference values refuse is still the
				// node's own, signed under the lab root: the verdict says so.
				want, verdict, reason := allowedMeasurement, v1alpha1.AttestationPassed, guard.Reason("")
				if i == tamperedWorker {
					want, verdict, reason = tamperedMeasurement, v1alpha1.AttestationFailed, guard.ReasonMeasurementNotAllowed
				}
				s := waitAttested(ctx, t, cfg, w, time.Minute, func(s *attestedSpec) bool { return s.TEE.Attestation.Verdict == verdict })
				if s.NodeUID != node.UID || s.Incarnation == "" || s.TEE.Type != "SEV-SNP" || s.TEE.Measurement != want ||
					s.TEE.ChipID == "" || s.TEE.SNPTCB == nil || s.TEE.Attestation.Reason != reason || s.TEE.Attestation.RootOfTrust != "lab" {
					t.Errorf("state of %s: %+v; want SEV-SNP %s, verdict %s %s, the lab root, UID %s", w, s, want, verdict, reason, node.UID)
				}
			}
			waitNodeEvent(ctx, t, cs, a.workers[tamperedWorker], "MEASUREMENT_NOT_ALLOWED")
			return ctx
		}).
		Assess("G-ATTESTATION-REPORT only the controller reaches an attester: a tenant pod cannot ask one for evidence", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			attesters, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{
				LabelSelector: "app.kubernetes.io/name=xila-guard-attester", FieldSelector: "spec.nodeName=" + a.workers[tamperedWorker]})
			if err != nil || len(attesters.Items) != 1 {
				t.Fatalf("the attester of %s: %v (%d pods)", a.workers[tamperedWorker], err, len(attesters.Items))
			}
			controllers, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=xila-guard-attest"})
			if err != nil || len(controllers.Items) == 0 {
				t.Fatalf("the attestation controller's pods: %v", err)
			}
			// A relay: a pod on the attested worker asks worker 2's attester.
			relay := createConnectPod(ctx, t, cs, a.tenant, "relay", attesters.Items[0].Status.PodIP+":8443")
			// The control: the same pod reaches the controller's metrics,
			// which stay open, so a refusal above is the policy's.
			control := createConnectPod(ctx, t, cs, a.tenant, "control", controllers.Items[0].Status.PodIP+":9090")
			if phase, log := waitPodDone(ctx, t, cs, control); phase != corev1.PodSucceeded {
				t.Fatalf("control connection to the controller's metrics: %s (%s)", phase, log)
			}
			if phase, log := waitPodDone(ctx, t, cs, relay); phase != corev1.PodFailed || !strings.Contains(log, "TIMEOUT") {
				t.Errorf("a tenant pod connecting to an attester: %s (%s), want a timeout", phase, log)
			}
			return ctx
		}).
		Assess("placement: only on the worker with the allowed measurement", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			for i := range 3 {
				p := createTenantPod(ctx, t, cs, a.tenant, fmt.Sprintf("confidential-%d", i), nil)
				if got := waitRunning(ctx, t, cs, a.tenant, p.Name).Spec.NodeName; got != a.workers[attestedWorker] {
					t.Errorf("pod %s runs on %s, want the attested worker %s", p.Name, got, a.workers[attestedWorker])
				}
			}
			p := createTenantPod(ctx, t, cs, a.tenant, "pinned-tampered", pinnedToNode(a.workers[tamperedWorker]))
			waitRefusedWith(ctx, t, cs, p, "MEASUREMENT_NOT_ALLOWED")
			deletePodNow(ctx, t, cs, p)
			return ctx
		}).
		Assess("G-ATTESTED-DEVICES real DRA driver: the lab TEE states one GPU in its signed report, the controller names its DRA device, and only that device is allocated to the tenant", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			g, _ := ctx.Value(attestedGPUKey{}).(attestedGPU)
			cs := clientset(t, cfg)
			w := a.workers[attestedWorker]
			want := v1alpha1.DRADeviceRef{Driver: lab.DRADriver, Pool: w, Device: "gpu-0"}
			waitAttested(ctx, t, cfg, w, time.Minute, func(s *attestedSpec) bool {
				return len(s.Devices) == 1 && s.Devices[0].ID == g.uuid && s.Devices[0].DRA != nil && *s.Devices[0].DRA == want
			})
			// The tampered worker's attestation fails: its TEE's word on
			// GPUs is not written.
			if s := waitAttested(ctx, t, cfg, a.workers[tamperedWorker], time.Minute, func(*attestedSpec) bool { return true }); len(s.Devices) != 0 {
				t.Errorf("the tampered worker's evidence lists devices %+v", s.Devices)
			}
			tpl := fixture.MakeResourceClaimTemplate("attested-gpu", a.tenant,
				indexed(fixture.MakeResourceClaim("", a.tenant).Request("gpu", lab.DRADriver, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning), 0).Obj()).Obj()
			if _, err := cs.ResourceV1().ResourceClaimTemplates(a.tenant).Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			p := fixture.MakePod("attested-gpu", a.tenant).Scheduler(lab.ControlledScheduler).Image(suite.Agnhost, corev1.PullNever).Args("pause").Obj()
			lab.WithClaimFromTemplate(tpl.Name)(p)
			lab.PinnedTo(w)(p)
			if _, err := cs.CoreV1().Pods(a.tenant).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			running := waitRunning(ctx, t, cs, a.tenant, p.Name)
			c := podClaim(ctx, t, cs, running)
			if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
				t.Fatalf("claim %s: allocation %+v, want one device", c.Name, c.Status.Allocation)
			}
			if r := c.Status.Allocation.Devices.Results[0]; r.Driver != want.Driver || r.Pool != want.Pool || r.Device != want.Device {
				t.Errorf("claim %s was given %s/%s/%s, want the attested GPU %s/%s/%s", c.Name, r.Driver, r.Pool, r.Device, want.Driver, want.Pool, want.Device)
			}
			// An allocator writing the devices the TEEs do not state: the
			// attested worker's other GPU, and the tampered worker's.
			allocator, _, err := labCluster(t, cfg).As("system:kube-scheduler")
			if err != nil {
				t.Fatal(err)
			}
			for i, target := range []struct{ node, device string }{{w, "gpu-1"}, {a.workers[tamperedWorker], "gpu-0"}} {
				claim := fixture.MakeResourceClaim(fmt.Sprintf("unattested-%d", i), a.tenant).Request("gpu", lab.DRADriver, 1).Config(lab.DRADriver, fixture.ExampleSpacePartitioning).Obj()
				created, err := cs.ResourceV1().ResourceClaims(a.tenant).Create(ctx, claim, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := fixture.RefusedWith(allocateByHand(ctx, allocator, created, target.node, target.device), guard.ReasonDeviceEvidenceMissing); err != nil {
					t.Errorf("allocating %s of %s, which no TEE states: %v", target.device, target.node, err)
				}
			}
			deletePodNow(ctx, t, cs, running)
			return ctx
		}).
		Assess("G-EPC-CAPACITY TEE resources: the attested worker offers its EPC and enclaves, counted like memory, again after kubelet restarts", assessTEEResources).
		Assess("key release: the tenant's pod on the attested worker gets the tenant's key", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a, k := attestedFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			w := a.workers[attestedWorker]
			// The holder keeps running, so that the later steps ask again
			// from the same pod, token and address.
			k.holder = "key-holder"
			p := createHolder(ctx, t, cs, a.tenant, k.holder)
			if p.Spec.NodeName != w {
				t.Fatalf("pod %s runs on %s, want the attested worker %s", p.Name, p.Spec.NodeName, w)
			}
			wantBoundEvidence(t, p, waitAttested(ctx, t, cfg, w, time.Minute, func(*attestedSpec) bool { return true }))
			r := kbsExec(ctx, t, cfg, a.tenant, k.holder, k.resource)
			wantReleased(t, "the holder", r, k.sha256)
			// The Event of the session's attestation: the broker's recorder
			// folds later Events of the same reason about the pod, the key's
			// included, into that one's series, so the audit line shows the key.
			waitKeyEvent(ctx, t, cs, p, keyReleasedEvent, "granted on node "+w)
			waitAudit(ctx, t, cs, "the holder's key", func(r *auditRecord) bool {
				return r.Decision == "released" && r.Pod == p.Name && r.Namespace == a.tenant && r.Tenant == a.tenant &&
					r.Key == k.resource && r.Node == w && r.Peer == p.Status.PodIP
			})
			return ctx
		}).
		Assess("key release: a pod Volcano's binder placed on the attested worker gets the key too", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a, k := attestedFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			w := a.workers[attestedWorker]
			c := labCluster(t, cfg)
			volcano, err := c.Profile("volcano")
			if err != nil {
				t.Fatal(err)
			}
			binder, err := c.AsServiceAccount(binderAccount(t, volcano))
			if err != nil {
				t.Fatal(err)
			}
			// A pod of a Volcano Job: no scheduler of this cluster picks
			// it up, the test binds it as Volcano's binder would.
			p := kbsPod("volcano-holder", "--hold")
			p.Labels = workloadLabels["volcano"]
			p.Spec.SchedulerName = volcano["schedulerName"].(string)
			p.Spec.Tolerations = []corev1.Toleration{{Key: lab.PoolLabel, Operator: corev1.TolerationOpEqual, Value: a.tenant, Effect: corev1.TaintEffectNoSchedule}}
			if _, err := cs.CoreV1().Pods(a.tenant).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the Volcano pod: %v", err)
			}
			if err := lab.Bind(ctx, binder, a.tenant, p.Name, w); err != nil {
				t.Fatalf("Volcano's binder binding its pod to the attested worker %s: %v", w, err)
			}
			running := waitRunning(ctx, t, cs, a.tenant, p.Name)
			// The webhook recorded the evidence it judged the binding on,
			// as the controlled scheduler does at PreBind.
			wantBoundEvidence(t, running, waitAttested(ctx, t, cfg, w, time.Minute, func(*attestedSpec) bool { return true }))
			wantReleased(t, "the Volcano pod", kbsExec(ctx, t, cfg, a.tenant, p.Name, k.resource), k.sha256)
			waitAudit(ctx, t, cs, "the Volcano pod's key", func(r *auditRecord) bool {
				return r.Decision == "released" && r.Pod == p.Name && r.Namespace == a.tenant && r.Key == k.resource && r.Node == w
			})
			// Bound to the tampered worker, the same pod is refused at the
			// binding, before it could ask for anything.
			q := p.DeepCopy()
			q.Name = "volcano-tampered"
			q, err = cs.CoreV1().Pods(a.tenant).Create(ctx, q, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating the second Volcano pod: %v", err)
			}
			err = lab.Bind(ctx, binder, a.tenant, q.Name, a.workers[tamperedWorker])
			if msg, denied := lab.AdmissionDenial(err); !denied || !strings.Contains(msg, "MEASUREMENT_NOT_ALLOWED") {
				t.Errorf("Volcano's binder binding a pod to the tampered worker: want MEASUREMENT_NOT_ALLOWED, got %v", err)
			}
			deletePodNow(ctx, t, cs, q)
			return ctx
		}).
		Assess("G-KEY-PEER key release: the holder's token replayed from another node is PEER_MISMATCH", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a, k := attestedFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			holder, err := cs.CoreV1().Pods(a.tenant).Get(ctx, k.holder, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The holder's token: the API server mints it bound to the
			// holder, as the kubelet does for its projected volume.
			tr, err := cs.CoreV1().ServiceAccounts(a.tenant).CreateToken(ctx, holder.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{Audiences: []string{kbsAudience}, ExpirationSeconds: ptrTo(int64(600)),
					BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: holder.Name, UID: holder.UID}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("a token bound to %s: %v", holder.Name, err)
			}
			k.replayNS = envconf.RandomName("xg-replay", 16)
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.replayNS}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().Secrets(k.replayNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "stolen"},
				StringData: map[string]string{"token": tr.Status.Token}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// The replay runs on the control plane, with the default scheduler.
			p := kbsPod("replay", "--token-file=/var/run/secrets/stolen/token", k.resource)
			p.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			p.Spec.Volumes = []corev1.Volume{{Name: "stolen", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "stolen"}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "stolen", MountPath: "/var/run/secrets/stolen", ReadOnly: true}}
			created := createWhenAccountExists(ctx, t, cs, k.replayNS, p)
			r, replay := podResult(ctx, t, cs, created)
			if replay.Spec.NodeName == holder.Spec.NodeName {
				t.Fatalf("the replay ran on the holder's node %s", replay.Spec.NodeName)
			}
			wantRefused(t, "the holder's token from "+replay.Spec.NodeName, r, "PEER_MISMATCH")
			// The refusal is about the token's pod, the holder.
			waitKeyEvent(ctx, t, cs, holder, keyRefusedEvent, "PEER_MISMATCH", replay.Status.PodIP)
			waitAudit(ctx, t, cs, "the replay", func(r *auditRecord) bool {
				return r.Decision == "refused" && slices.Contains(r.Reasons, "PEER_MISMATCH") && r.Pod == holder.Name &&
					r.Namespace == a.tenant && r.Peer == replay.Status.PodIP
			})
			// The holder itself still gets the key.
			wantReleased(t, "the holder again", kbsExec(ctx, t, cfg, a.tenant, k.holder, k.resource), k.sha256)
			return ctx
		}).
		Assess("G-KEY-POLICY key release: another tenant's pod on the same worker is KEY_NOT_OWNED", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a, k := attestedFrom(ctx, t), keyReleaseFrom(ctx, t)
			cs := clientset(t, cfg)
			// The other tenant shares the pool and the policy: its pod is
			// placed on the attested worker and attests, but the key is
			// the attested tenant's.
			p := createHolder(ctx, t, cs, k.other, "borrower")
			if p.Spec.NodeName != a.workers[attestedWorker] {
				t.Errorf("pod %s/%s runs on %s, want the attested worker %s", p.Namespace, p.Name, p.Spec.NodeName, a.workers[attestedWorker])
			}
			wantRefused(t, "another tenant's pod", kbsExec(ctx, t, cfg, k.other, p.Name, k.resource), "KEY_NOT_OWNED")
			waitKeyEvent(ctx, t, cs, p, keyRefusedEvent, "KEY_NOT_OWNED", "key "+k.resource)
			return ctx
		}).
		Assess("attester stopped: the node's attestation grows stale and it is refused; back, it is attested anew", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			w := a.workers[attestedWorker]
			before := waitAttested(ctx, t, cfg, w, time.Minute, func(s *attestedSpec) bool { return s.TEE.Attestation.Verdict == "Passed" })
			patchNodeLabels(ctx, t, cs, w, map[string]*string{attesterLabel: nil})
			waitNoAttester(ctx, t, cs, w)
			// The last verdict written before the attester went; once it is
			// older than maxAttestationAge the node is refused.
			last := waitAttested(ctx, t, cfg, w, time.Minute, func(*attestedSpec) bool { return true })
			time.Sleep(time.Until(last.TEE.Attestation.VerifiedAt.Add(maxAttestationAge + time.Second)))
			if again := waitAttested(ctx, t, cfg, w, time.Minute, func(*attestedSpec) bool { return true }); !again.TEE.Attestation.VerifiedAt.Equal(&last.TEE.Attestation.VerifiedAt) {
				t.Fatalf("the state of %s was attested again at %s with no attester on the node", w, again.TEE.Attestation.VerifiedAt)
			}
			p := createTenantPod(ctx, t, cs, a.tenant, "after-stop", pinnedToNode(w))
			waitRefusedWith(ctx, t, cs, p, "ATTESTATION_STALE")
			// The key holder, bound before, is refused as new pods are.
			k := keyReleaseFrom(ctx, t)
			wantRefused(t, "the holder, its node stale", kbsExec(ctx, t, cfg, a.tenant, k.holder, k.resource), "ATTESTATION_STALE")
			patchNodeLabels(ctx, t, cs, w, map[string]*string{attesterLabel: ptrTo("on")})
			after := waitAttested(ctx, t, cfg, w, 2*time.Minute, func(s *attestedSpec) bool {
				return s.TEE.Attestation.Verdict == "Passed" && s.Incarnation != before.Incarnation
			})
			if after.NodeUID != before.NodeUID {
				t.Errorf("node UID changed from %s to %s", before.NodeUID, after.NodeUID)
			}
			if got := waitRunning(ctx, t, cs, a.tenant, p.Name).Spec.NodeName; got != w {
				t.Errorf("pod %s runs on %s, want %s", p.Name, got, w)
			}
			// Attested anew, by another attester: the holder was bound
			// against the evidence before and gets no key again; a pod
			// bound against the new evidence does.
			wantRefused(t, "the holder, its node attested anew", kbsExec(ctx, t, cfg, a.tenant, k.holder, k.resource), "NODE_CHANGED")
			fresh := createHolder(ctx, t, cs, a.tenant, "key-after-return")
			if fresh.Spec.NodeName != w {
				t.Errorf("pod %s runs on %s, want %s", fresh.Name, fresh.Spec.NodeName, w)
			}
			wantBoundEvidence(t, fresh, after)
			wantReleased(t, "a pod bound after the attester came back", kbsExec(ctx, t, cfg, a.tenant, fresh.Name, k.resource), k.sha256)
			return ctx
		})
	f = migrationSteps(f)
	f = f.
		Assess("attester tampered with: its node states another measurement and new pods are Pending with MEASUREMENT_NOT_ALLOWED", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			helmInstallAttestation(ctx, t, cfg, "lab", a.workers...)
			// Every worker: the migration steps before left both attested
			// with the allowed measurement, and a worker not yet attested
			// anew still has that evidence, valid for maxAttestationAge.
			for _, w := range a.workers {
				s := waitAttested(ctx, t, cfg, w, 2*time.Minute, func(s *attestedSpec) bool {
					return s.TEE.Attestation.Reason == "MEASUREMENT_NOT_ALLOWED" && s.TEE.Measurement == tamperedMeasurement
				})
				if s.TEE.Attestation.Verdict != "Failed" {
					t.Errorf("state of %s after tampering: %+v; want Failed with the tampered measurement", w, s)
				}
			}
			p := createTenantPod(ctx, t, cs, a.tenant, "after-tamper", nil)
			waitRefusedWith(ctx, t, cs, p, "MEASUREMENT_NOT_ALLOWED")
			deletePodNow(ctx, t, cs, p)
			return ctx
		}).
		Assess("production profile: the lab chain is refused as TEST_ROOT_OF_TRUST", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			a := attestedFrom(ctx, t)
			cs := clientset(t, cfg)
			helmInstallAttestation(ctx, t, cfg, "production", a.workers[tamperedWorker])
			w := a.workers[attestedWorker]
			waitAttested(ctx, t, cfg, w, 2*time.Minute, func(s *attestedSpec) bool {
				return s.TEE.Attestation.Verdict == "Failed" && s.TEE.Attestation.Reason == "TEST_ROOT_OF_TRUST"
			})
			p := createTenantPod(ctx, t, cs, a.tenant, "production", pinnedToNode(w))
			waitRefusedWith(ctx, t, cs, p, "ATTESTATION_FAILED")
			return ctx
		}).
		Teardown(uninstallAttestation)
	testenv.Test(t, f.Feature())
}

// installAttestation makes the workers a tenant's pool under attesters and
// installs the chart (lab profile) with a policy that requires the allowed
// measurement and a fresh attestation.
func installAttestation(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	cs := clientset(t, cfg)
	dyn := dynamicClientFor(t, cfg)
	if err := labCluster(t, cfg).ApplyCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	a := &tenantPool{tenant: envconf.RandomName("xg-attested", 16), workers: twoWorkers(ctx, t, cs)}
	ctx = context.WithValue(ctx, attestedKey{}, a)
	createTenant(ctx, t, cfg, fixture.MakePlacementPolicy(a.tenant, v1alpha1.SourceAttested).MaxAge(time.Minute).
		TEE(v1alpha1.TEESEVSNP).Measurements(allowedMeasurement).RequireAttestation(maxAttestationAge).
		Devices(v1alpha1.DevicePolicy{DeviceClasses: []string{lab.DRADriver}}).Obj())
	ctx = setUpKeyRelease(ctx, t, cs, dyn, a.tenant)
	for _, w := range a.workers {
		setPool(ctx, t, cfg, w, a.tenant)
		patchNodeLabels(ctx, t, cs, w, map[string]*string{attesterLabel: ptrTo("on")})
	}
	// The DRA example driver publishes two GPUs on each worker, and the
	// lab TEE of the attested worker states the first of its own.
	slices, err := labCluster(t, cfg).InstallDRADriver(ctx, suite.DRAExampleChart, suite.DRAExampleImage, 2, a.workers)
	if err != nil {
		t.Fatal(err)
	}
	w := a.workers[attestedWorker]
	uuid, model, err := lab.DRAGPU(slices[w], "gpu-0")
	if err != nil {
		t.Fatal(err)
	}
	ctx = context.WithValue(ctx, attestedGPUKey{}, attestedGPU{node: w, uuid: uuid, model: model})
	helmInstallAttestation(ctx, t, cfg, "lab", a.workers[tamperedWorker])
	return ctx
}

// attestedGPU is the GPU the lab TEE of the attested worker states.
type attestedGPU struct{ node, uuid, model string }

type attestedGPUKey struct{}

// helmInstallAttestation installs or upgrades the chart with the
// attestation controller in profile, the attesters of the tampered workers
// stating tamperedMeasurement and the others allowedMeasurement, and the
// Volcano integration, whose binder it lets bind.
func helmInstallAttestation(ctx context.Context, t *testing.T, cfg *envconf.Config, profile string, tampered ...string) {
	t.Helper()
	c := labCluster(t, cfg)
	volcano, err := c.Profile("volcano")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.GrantBinding(ctx, binderRole, binderAccount(t, volcano)); err != nil {
		t.Fatal(err)
	}
	measurements := map[string]any{}
	for _, w := range tampered {
		measurements[w] = tamperedMeasurement
	}
	values := lab.Merge(map[string]any{
		"confidential": map[string]any{
			"profile":      profile,
			"vmMigrations": true,
			"attester": map[string]any{"lab": map[string]any{
				"measurement": allowedMeasurement, "nodeMeasurements": measurements}},
			"referenceValues": map[string]any{"measurements": []any{
				map[string]any{"tee": "SEV-SNP", "measurement": allowedMeasurement}}},
		},
		"orchestratorIntegrations": []any{volcano},
		// The NetworkPolicy agent enforces the chart's policies around the
		// attesters and the challenge endpoint.
		"networkPolicy": map[string]any{"enabled": true},
	})
	// The lab TEE states its GPU, the webhook judges allocations, and the
	// DRA driver's kubelet plugin may run on the pool.
	if g, ok := ctx.Value(attestedGPUKey{}).(attestedGPU); ok {
		values = lab.Merge(values, lab.DRADriverTrust(), map[string]any{
			"webhook": map[string]any{"devices": true},
			"confidential": map[string]any{"attester": map[string]any{"lab": map[string]any{"nodeGPUs": map[string]any{
				g.node: []any{map[string]any{"id": g.uuid, "vendor": "example", "model": g.model, "ccMode": "Off"}},
			}}}},
		})
	}
	if !nodeHasCapBPF(ctx, t, workerNames(ctx, t, clientset(t, cfg))[0]) {
		values = lab.Merge(values, map[string]any{"networkPolicy": map[string]any{"extraCapabilities": []any{"SYS_ADMIN"}}})
	}
	installChart(ctx, t, cfg, []string{"attest-values.yaml"}, values)
}

// labCluster is the lab's view of the cluster of cfg.
func labCluster(t *testing.T, cfg *envconf.Config) *lab.Cluster {
	t.Helper()
	c, err := lab.NewCluster(cfg.KubeconfigFile(), suite.BinDir, suite.RepoRoot, suite.ImageTag, suite.Agnhost)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// binderAccount is the one binder account of an integration profile.
func binderAccount(t *testing.T, integration map[string]any) string {
	t.Helper()
	binders, _ := integration["binderServiceAccounts"].([]any)
	if len(binders) != 1 {
		t.Fatalf("integration %v: want one binder account, got %v", integration["name"], binders)
	}
	return binders[0].(string)
}

// uninstallAttestation gives the workers back and removes what the test
// made, the chart and the lab chain included.
func uninstallAttestation(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	a, _ := ctx.Value(attestedKey{}).(*tenantPool)
	if a == nil {
		return ctx
	}
	cs := clientset(t, cfg)
	zero := int64(0)
	dyn := dynamicClientFor(t, cfg)
	_ = cs.CoreV1().Pods(a.tenant).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	_ = dyn.Resource(gvrMigration).Namespace(a.tenant).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = dyn.Resource(gvrVMI).Namespace(a.tenant).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	tearDownKeyRelease(ctx, t, cs, dyn, a.tenant)
	uninstallChart(ctx, t, cfg)
	if err := labCluster(t, cfg).UninstallDRADriver(ctx); err != nil {
		t.Errorf("uninstalling the DRA driver: %v", err)
	}
	_ = cs.CoreV1().Secrets(lab.PlatformNamespace).Delete(ctx, "xila-guard-attest-lab-chain", metav1.DeleteOptions{})
	if err := labCluster(t, cfg).RevokeBinding(ctx, binderRole); err != nil {
		t.Errorf("revoking %s: %v", binderRole, err)
	}
	for _, w := range a.workers {
		patchNodeLabels(ctx, t, cs, w, map[string]*string{attesterLabel: nil})
	}
	removePoolTenant(ctx, t, cfg, a.tenant, a.workers)
	return ctx
}

// attestedSpec is the spec of a NodeSecurityState with attested evidence:
// waitAttested returns it only with its TEE and attestation set.
type attestedSpec = v1alpha1.NodeSecurityStateSpec

// waitAttested waits until the node's state is attested evidence that
// satisfies ok.
func waitAttested(ctx context.Context, t *testing.T, cfg *envconf.Config, node string, timeout time.Duration, ok func(*attestedSpec) bool) *attestedSpec {
	t.Helper()
	dyn := dynamicClientFor(t, cfg)
	var last *attestedSpec
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(lab.States).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		state := &v1alpha1.NodeSecurityState{}
		if err := fixture.FromUnstructured(u, state); err != nil {
			return false, err
		}
		last = &state.Spec
		return last.Source == v1alpha1.SourceAttested && last.TEE != nil && last.TEE.Attestation != nil && ok(last), nil
	})
	if err != nil {
		t.Fatalf("attested NodeSecurityState %s: %v (last seen %+v)", node, err, last)
	}
	return last
}

// waitNoAttester waits until no attester pod runs on the node.
func waitNoAttester(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(lab.PlatformNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=xila-guard-attester", FieldSelector: "spec.nodeName=" + node,
		})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the attester of %s did not stop: %v", node, err)
	}
}

// waitNodeEvent waits for a Warning Event with reason about the node's
// NodeSecurityState.
func waitNodeEvent(ctx context.Context, t *testing.T, cs kubernetes.Interface, node, reason string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + node})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Regarding.Kind+"/"+e.Reason)
			if e.Regarding.Kind == "NodeSecurityState" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event about the state of %s: %v (seen %s)", reason, node, err, strings.Join(seen, ", "))
	}
}

// createConnectPod runs agnhost connect to target (host:port, 3s timeout)
// once, as a tenant pod placed by the controlled scheduler.
func createConnectPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name, target string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			SchedulerName: lab.ControlledScheduler,
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "connect", Image: suite.Agnhost, ImagePullPolicy: corev1.PullNever,
				Args: []string{"connect", target, "--timeout=3s"},
			}},
		},
	}
	created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// waitPodDone waits until the pod has succeeded or failed and returns its
// phase and log.
func waitPodDone(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) (corev1.PodPhase, string) {
	t.Helper()
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = got.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s did not finish: %v (phase %s)", p.Namespace, p.Name, err, phase)
	}
	log, _ := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return phase, strings.TrimSpace(string(log))
}
