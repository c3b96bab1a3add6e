package admission

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/core/wire"
)

func TestPodRules(t *testing.T) {
	hostPath := func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	}
	tolerate := func(tol corev1.Toleration) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Tolerations = append(s.Tolerations, tol) }
	}
	requireNode := func(req corev1.NodeSelectorRequirement, fields bool) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			term := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}}
			if fields {
				term = corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req}}
			}
			s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpExists}}}, term,
				}},
			}}
		}
	}
	ephemeral := func(sc *corev1.SecurityContext) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.EphemeralContainers = append(s.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox", SecurityContext: sc},
			})
		}
	}
	cases := []struct {
		name string
		op   admissionv1.Operation
		sub  string
		user string
		pod  *corev1.Pod
		old  *corev1.Pod
		// want lists the refusal's reason codes; nil means allowed.
		want []guard.Reason
		// evaluated says whether the evaluator must be asked.
		evaluated bool
	}{
		// Protected pods.
		{name: "protected compliant", pod: makePod(tenantNS).obj(), evaluated: true},
		{name: "protected external scheduler with its profile's workload label", pod: makePod(tenantNS).scheduler("volcano").label("volcano.sh/job-name", "j").obj(), evaluated: true},
		{name: "protected external scheduler without its profile's workload label", pod: makePod(tenantNS).scheduler("volcano").obj(),
			want: []guard.Reason{guard.ReasonSchedulerProfileMismatch}},
		{name: "protected default scheduler", pod: makePod(tenantNS).scheduler("default-scheduler").obj(),
			want: []guard.Reason{guard.ReasonSchedulerNotAllowed}},
		{name: "protected empty scheduler", pod: makePod(tenantNS).scheduler("").obj(),
			want: []guard.Reason{guard.ReasonSchedulerNotAllowed}},
		{name: "protected nodeName at create", pod: makePod(tenantNS).nodeName(plainNode).obj(),
			want: []guard.Reason{guard.ReasonNodeNameSet}},
		{name: "protected privileged container", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.Containers[0].SecurityContext = privileged() }).obj(),
			want: []guard.Reason{guard.ReasonPrivilegedContainer}},
		{name: "protected privileged init container", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", SecurityContext: privileged()}}
		}).obj(), want: []guard.Reason{guard.ReasonPrivilegedContainer}},
		{name: "protected privileged ephemeral container at create", pod: makePod(tenantNS).mod(ephemeral(privileged())).obj(),
			want: []guard.Reason{guard.ReasonPrivilegedContainer}},
		{name: "protected unprivileged security context", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			f := false
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &f}
		}).obj(), evaluated: true},
		{name: "protected hostNetwork", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.HostNetwork = true }).obj(),
			want: []guard.Reason{guard.ReasonHostNetwork}},
		{name: "protected hostPID", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.HostPID = true }).obj(),
			want: []guard.Reason{guard.ReasonHostPID}},
		{name: "protected hostIPC", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.HostIPC = true }).obj(),
			want: []guard.Reason{guard.ReasonHostIPC}},
		{name: "protected hostPath", pod: makePod(tenantNS).mod(hostPath).obj(), want: []guard.Reason{guard.ReasonHostPathVolume}},
		{name: "protected everything at once", pod: makePod(tenantNS).scheduler("other").nodeName(poolNode).mod(hostPath).mod(func(s *corev1.PodSpec) {
			s.HostNetwork, s.HostPID, s.HostIPC = true, true, true
			s.Containers[0].SecurityContext = privileged()
		}).obj(), want: []guard.Reason{guard.ReasonSchedulerNotAllowed, guard.ReasonNodeNameSet, guard.ReasonPrivilegedContainer,
			guard.ReasonHostNetwork, guard.ReasonHostPID, guard.ReasonHostIPC, guard.ReasonHostPathVolume}},
		{name: "protected trusted service account is no exemption", pod: makePod(tenantNS).sa("device-plugin").mod(func(s *corev1.PodSpec) { s.HostNetwork = true }).obj(),
			want: []guard.Reason{guard.ReasonHostNetwork}},
		{name: "protected unresolved tenant", pod: makePod("orphaned").obj(), want: []guard.Reason{guard.ReasonTenantUnresolved}},
		{name: "protected pod may tolerate exactly its pool", pod: makePod(tenantNS).mod(tolerate(corev1.Toleration{Key: pool, Value: "acme", Effect: corev1.TaintEffectNoSchedule})).obj(), evaluated: true},
		{name: "protected pod may select its pool", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{pool: "acme"} }).obj(), evaluated: true},
		{name: "protected pod may require its pool", pod: makePod(tenantNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpIn, Values: []string{"acme"}}, false)).obj(), evaluated: true},
		{name: "protected pod may require no pool", pod: makePod(tenantNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpDoesNotExist}, false)).obj(), evaluated: true},
		{name: "protected pod tolerates every pool (Exists)", pod: makePod(tenantNS).mod(tolerate(corev1.Toleration{Key: pool, Operator: corev1.TolerationOpExists})).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod tolerates another tenant's pool", pod: makePod(tenantNS).mod(tolerate(corev1.Toleration{Key: pool, Value: "beta", Effect: corev1.TaintEffectNoSchedule})).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod tolerates everything", pod: makePod(tenantNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod selects another tenant's pool", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{pool: "beta"} }).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod requires another tenant's pool", pod: makePod(tenantNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpIn, Values: []string{"acme", "beta"}}, false)).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod requires any pool", pod: makePod(tenantNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpExists}, false)).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod requires not its pool", pod: makePod(tenantNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"acme"}}, false)).obj(),
			want: []guard.Reason{guard.ReasonForeignPool}},
		{name: "protected pod adds SYS_ADMIN", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "protected pod runs seccomp Unconfined", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "protected pod unmasks /proc", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			m := corev1.UnmaskedProcMount
			s.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &m}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "protected pod runs AppArmor unconfined", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "protected pod takes a host port", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "protected pod sets an unsafe sysctl", pod: makePod(tenantNS).mod(func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}
		}).obj(), want: []guard.Reason{guard.ReasonPodSecurityBaseline}},
		{name: "baseline pod under a restricted policy", pod: makePod(strictNS).obj(),
			want: []guard.Reason{guard.ReasonPodSecurityRestricted, guard.ReasonPodSecurityRestricted, guard.ReasonPodSecurityRestricted, guard.ReasonPodSecurityRestricted}},
		{name: "G-POD-IMAGES images by allowed digest, with or without a tag", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "registry.example/acme/train@" + imageDigest
			s.InitContainers = []corev1.Container{{Name: "fetch", Image: "registry.example/acme/train:v1@" + imageDigest}}
		}).obj(), evaluated: true},
		{name: "G-POD-IMAGES image by tag under a digest allow-list", pod: makePod(pinnedNS).obj(), want: []guard.Reason{guard.ReasonImageNotPinned}},
		{name: "G-POD-IMAGES image digest not allowed", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "registry.example/acme/train@sha256:" + strings.Repeat("0", 64)
		}).obj(), want: []guard.Reason{guard.ReasonImageNotAllowed}},
		{name: "G-POD-IMAGES uppercase or short digest is not pinned", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "train@" + strings.ToUpper(imageDigest)
			s.InitContainers = []corev1.Container{{Name: "fetch", Image: "train@sha256:1b8a"}}
		}).obj(), want: []guard.Reason{guard.ReasonImageNotPinned, guard.ReasonImageNotPinned}},
		{name: "G-POD-IMAGES an ephemeral debug container by tag is refused too", op: admissionv1.Update, sub: "ephemeralcontainers",
			old:  makePod(pinnedNS).nodeName(poolNode).mod(func(s *corev1.PodSpec) { s.Containers[0].Image = "train@" + imageDigest }).obj(),
			pod:  makePod(pinnedNS).nodeName(poolNode).mod(func(s *corev1.PodSpec) { s.Containers[0].Image = "train@" + imageDigest }).mod(ephemeral(nil)).obj(),
			want: []guard.Reason{guard.ReasonImageNotPinned}},
		{name: "restricted pod under a restricted policy", pod: makePod(strictNS).mod(func(s *corev1.PodSpec) {
			f, t := false, true
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &t, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			s.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &f, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}).obj(), evaluated: true},

		// Protected pods at UPDATE: only what the update adds is refused.
		{name: "protected update adds privileged ephemeral container", op: admissionv1.Update, sub: "ephemeralcontainers",
			old: makePod(tenantNS).nodeName(poolNode).obj(), pod: makePod(tenantNS).nodeName(poolNode).mod(ephemeral(privileged())).obj(),
			want: []guard.Reason{guard.ReasonPrivilegedContainer}},
		{name: "protected update adds plain ephemeral container", op: admissionv1.Update, sub: "ephemeralcontainers",
			old: makePod(tenantNS).nodeName(poolNode).obj(), pod: makePod(tenantNS).nodeName(poolNode).mod(ephemeral(nil)).obj()},
		{name: "G-POD-IMAGES image changed to one not allowed on a running pod", op: admissionv1.Update,
			old:  makePod(pinnedNS).nodeName(poolNode).mod(func(s *corev1.PodSpec) { s.Containers[0].Image = "train@" + imageDigest }).obj(),
			pod:  makePod(pinnedNS).nodeName(poolNode).mod(func(s *corev1.PodSpec) { s.Containers[0].Image = "train:latest" }).obj(),
			want: []guard.Reason{guard.ReasonImageNotPinned}},
		{name: "protected update of a bound pod", op: admissionv1.Update,
			old: makePod(tenantNS).nodeName(poolNode).obj(), pod: makePod(tenantNS).nodeName(poolNode).annotate("a", "b").obj()},
		{name: "protected update keeps a pre-existing violation", op: admissionv1.Update,
			old: makePod(tenantNS).scheduler("default-scheduler").obj(), pod: makePod(tenantNS).scheduler("default-scheduler").annotate("a", "b").obj()},
		{name: "protected update of an unresolved tenant's pod", op: admissionv1.Update,
			old: makePod("orphaned").obj(), pod: makePod("orphaned").annotate("a", "b").obj()},
		// A pod that waits to be scheduled and changes where it may go is
		// judged whole, whatever it was judged under before: a pod created
		// while its namespace belonged to no tenant cannot pick up a pool
		// toleration while the namespace carries a tenant label.
		{name: "an unresolved tenant's gated pod may tolerate no pool", op: admissionv1.Update,
			old:  makePod("orphaned").scheduler("default-scheduler").obj(),
			pod:  makePod("orphaned").scheduler("default-scheduler").mod(tolerate(corev1.Toleration{Key: pool, Value: "acme", Effect: corev1.TaintEffectNoSchedule})).obj(),
			want: []guard.Reason{guard.ReasonSchedulerNotAllowed, guard.ReasonForeignPool, guard.ReasonTenantUnresolved}},
		{name: "a default-scheduler pod of a tenant namespace may not pick up its pool's toleration", op: admissionv1.Update,
			old:  makePod(tenantNS).scheduler("default-scheduler").obj(),
			pod:  makePod(tenantNS).scheduler("default-scheduler").mod(tolerate(corev1.Toleration{Key: pool, Value: "acme", Effect: corev1.TaintEffectNoSchedule})).obj(),
			want: []guard.Reason{guard.ReasonSchedulerNotAllowed}},
		{name: "a tenant's gated pod may add its own pool's toleration", op: admissionv1.Update,
			old: makePod(tenantNS).obj(),
			pod: makePod(tenantNS).mod(tolerate(corev1.Toleration{Key: pool, Value: "acme", Effect: corev1.TaintEffectNoSchedule})).obj()},
		{name: "an unresolved tenant's pod may not select a pool", pod: makePod("orphaned").mod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{pool: ""} }).obj(),
			want: []guard.Reason{guard.ReasonForeignPool, guard.ReasonTenantUnresolved}},
		// Mirror pods in a tenant's namespace are the tenant's placement on
		// the node whose kubelet creates them.
		{name: "G-MIRROR-POD kubelet mirror pod of a tenant on its compliant pool node", user: "system:node:" + poolNode,
			pod: makePod(tenantNS).nodeName(poolNode).annotate(mirrorPodAnnotation, "x").obj(), evaluated: true},
		{name: "G-MIRROR-POD kubelet mirror pod of a tenant on another tenant's pool node", user: "system:node:" + betaNode,
			pod: makePod(tenantNS).nodeName(betaNode).annotate(mirrorPodAnnotation, "x").obj(), evaluated: true, want: []guard.Reason{guard.ReasonTenantMismatch}},
		{name: "G-MIRROR-POD kubelet mirror pod of a tenant on a general node under confinement Pool", user: "system:node:" + plainNode,
			pod: makePod(tenantNS).nodeName(plainNode).annotate(mirrorPodAnnotation, "x").obj(), evaluated: true, want: []guard.Reason{guard.ReasonOutsidePool}},
		{name: "G-MIRROR-POD kubelet mirror pod of a tenant on its time-sliced pool node", user: "system:node:" + sharedGPU,
			pod: makePod(tenantNS).nodeName(sharedGPU).annotate(mirrorPodAnnotation, "x").obj(), evaluated: true, want: []guard.Reason{guard.ReasonTimeSlicingForbidden}},
		{name: "G-MIRROR-POD kubelet mirror pod of a tenant on an unknown node", user: "system:node:ghost",
			pod: makePod(tenantNS).nodeName("ghost").annotate(mirrorPodAnnotation, "x").obj(), evaluated: true, want: []guard.Reason{guard.ReasonNodeUnknown}},
		{name: "G-POD-IMAGES image volume by tag under a digest allow-list", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "train@" + imageDigest
			s.Volumes = []corev1.Volume{{Name: "weights", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/weights:latest"}}}}
		}).obj(), want: []guard.Reason{guard.ReasonImageNotPinned}},
		{name: "G-POD-IMAGES image volume of a digest not allowed", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "train@" + imageDigest
			s.Volumes = []corev1.Volume{{Name: "weights", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "weights@sha256:" + strings.Repeat("0", 64)}}}}
		}).obj(), want: []guard.Reason{guard.ReasonImageNotAllowed}},
		{name: "G-POD-IMAGES image volume of an allowed digest", pod: makePod(pinnedNS).mod(func(s *corev1.PodSpec) {
			s.Containers[0].Image = "train@" + imageDigest
			s.Volumes = []corev1.Volume{{Name: "weights", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "weights@" + imageDigest}}}}
		}).obj(), evaluated: true},

		// Other pods.
		{name: "plain pod", pod: makePod(plainNS).scheduler("default-scheduler").obj()},
		{name: "plain privileged pod is not this webhook's business", pod: makePod(plainNS).mod(func(s *corev1.PodSpec) {
			s.HostNetwork = true
			s.Containers[0].SecurityContext = privileged()
		}).obj()},
		{name: "plain pool toleration", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Key: pool, Operator: corev1.TolerationOpEqual, Value: "acme", Effect: corev1.TaintEffectNoSchedule})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration}},
		{name: "plain pool toleration of another value", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Key: pool, Operator: corev1.TolerationOpEqual, Value: "future"})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration}},
		{name: "plain wildcard toleration", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration}},
		{name: "plain wildcard NoSchedule toleration", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration}},
		{name: "plain wildcard NoExecute toleration does not tolerate NoSchedule", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})).obj()},
		{name: "plain ordinary toleration", pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})).obj()},
		{name: "plain nodeSelector on the pool label", pod: makePod(plainNS).mod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{pool: "acme"} }).obj(),
			want: []guard.Reason{guard.ReasonPoolSelector}},
		{name: "plain nodeSelector elsewhere", pod: makePod(plainNS).mod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a"} }).obj()},
		{name: "plain required affinity In pool", pod: makePod(plainNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpIn, Values: []string{"acme"}}, false)).obj(),
			want: []guard.Reason{guard.ReasonPoolSelector}},
		{name: "plain required affinity Exists pool", pod: makePod(plainNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpExists}, false)).obj(),
			want: []guard.Reason{guard.ReasonPoolSelector}},
		{name: "plain required affinity DoesNotExist pool", pod: makePod(plainNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: pool, Operator: corev1.NodeSelectorOpDoesNotExist}, false)).obj()},
		{name: "plain required affinity on a pool node's name", pod: makePod(plainNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{poolNode}}, true)).obj(),
			want: []guard.Reason{guard.ReasonPoolNodeName}},
		{name: "plain required affinity on a plain node's name", pod: makePod(plainNS).mod(requireNode(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{plainNode}}, true)).obj()},
		{name: "plain nodeName on a pool node", pod: makePod(plainNS).nodeName(poolNode).obj(), want: []guard.Reason{guard.ReasonPoolNodeName}},
		{name: "plain nodeName on a plain node", pod: makePod(plainNS).nodeName(plainNode).obj()},
		{name: "plain nodeName on an unknown node", pod: makePod(plainNS).nodeName("ghost").obj(), want: []guard.Reason{guard.ReasonNodeUnknown}},
		{name: "a trusted account's DaemonSet pod may target the pool", user: "system:serviceaccount:kube-system:daemon-set-controller",
			pod: makePod("gpu-operator").sa("device-plugin").daemonSet().nodeName(poolNode).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).obj()},
		{name: "a trusted account's DaemonSet pod created by the controller manager itself", user: "system:kube-controller-manager",
			pod: makePod("gpu-operator").sa("device-plugin").daemonSet().nodeName(poolNode).obj()},
		{name: "a trusted account's pod that is no DaemonSet's is not trusted", user: "system:serviceaccount:kube-system:daemon-set-controller",
			pod:  makePod("gpu-operator").sa("device-plugin").nodeName(poolNode).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration, guard.ReasonPoolNodeName}},
		{name: "a trusted account's DaemonSet pod created by someone else is not trusted", user: "mallory",
			pod: makePod("gpu-operator").sa("device-plugin").daemonSet().nodeName(poolNode).obj(), want: []guard.Reason{guard.ReasonPoolNodeName}},
		{name: "trusted name in another namespace is not trusted", user: "system:serviceaccount:kube-system:daemon-set-controller", pod: makePod(plainNS).sa("device-plugin").daemonSet().nodeName(poolNode).obj(),
			want: []guard.Reason{guard.ReasonPoolNodeName}},
		{name: "kubelet mirror pod on its own pool node", user: "system:node:" + poolNode,
			pod: makePod(plainNS).nodeName(poolNode).annotate(mirrorPodAnnotation, "x").obj()},
		{name: "kubelet mirror pod on another node", user: "system:node:" + plainNode,
			pod: makePod(plainNS).nodeName(poolNode).annotate(mirrorPodAnnotation, "x").obj(), want: []guard.Reason{guard.ReasonPoolNodeName}},
		{name: "plain update adds a pool toleration", op: admissionv1.Update,
			old: makePod(plainNS).obj(), pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Key: pool, Operator: corev1.TolerationOpExists})).obj(),
			want: []guard.Reason{guard.ReasonPoolToleration}},
		{name: "plain update keeps a pre-existing toleration", op: admissionv1.Update,
			old: makePod(plainNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).obj(),
			pod: makePod(plainNS).mod(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})).annotate("a", "b").obj()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &fakeEvaluator{verdict: allowVerdict()}
			v := newValidator(t, newFakeCluster(), ev)
			op := tc.op
			if op == "" {
				op = admissionv1.Create
			}
			user := tc.user
			if user == "" {
				user = "system:serviceaccount:kube-system:replicaset-controller"
			}
			var old *corev1.Pod
			if tc.old != nil {
				old = tc.old
			}
			req := request(t, "pods", tc.sub, op, tc.pod.Namespace, user, tc.pod, nil)
			if old != nil {
				req.OldObject = raw(t, old)
			}
			resp := post(t, v.PodsHandler(), req)
			got := codes(resp)
			want := make([]string, len(tc.want))
			for i, r := range tc.want {
				want[i] = string(r)
			}
			if resp.Allowed != (len(tc.want) == 0) || !slices.Equal(got, want) {
				t.Fatalf("allowed=%v codes=%v, want codes %v; message: %v", resp.Allowed, got, want, resp.Result)
			}
			if !resp.Allowed {
				msg := resp.Result.Message
				for _, r := range tc.want {
					if !strings.Contains(msg, string(r)) || !strings.Contains(msg, "rule ") {
						t.Errorf("message %q does not name rule and reason %s", msg, r)
					}
				}
				if resp.Result.Code != 403 {
					t.Errorf("code %d, want 403", resp.Result.Code)
				}
				if resp.AuditAnnotations["reasons"] == "" {
					t.Error("no reasons audit annotation")
				}
			}
			if (ev.calls > 0) != tc.evaluated {
				t.Errorf("evaluator calls = %d, want evaluated=%v", ev.calls, tc.evaluated)
			}
		})
	}
}

func TestProtectedPodEvaluator(t *testing.T) {
	cases := []struct {
		name    string
		verdict wire.Verdict
		want    guard.Reason
		message string
	}{
		{name: "allow", verdict: allowVerdict()},
		{name: "no policy", verdict: wire.Verdict{Decision: guard.DecisionIndeterminate, Reasons: []guard.Reason{guard.ReasonNoPolicy}, Message: "NO_POLICY: no policy"},
			want: guard.ReasonNoPolicy, message: "NO_POLICY: no policy"},
		{name: "deny without reasons", verdict: wire.Verdict{Decision: guard.DecisionDeny}, want: guard.ReasonEvaluatorError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &fakeEvaluator{verdict: tc.verdict}
			v := newValidator(t, newFakeCluster(), ev)
			pod := makePod(tenantNS).obj()
			resp := post(t, v.PodsHandler(), request(t, "pods", "", admissionv1.Create, tenantNS, "u", pod, nil))
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result)
				}
			} else {
				if got := codes(resp); resp.Allowed || len(got) == 0 || got[0] != string(tc.want) {
					t.Fatalf("allowed=%v codes=%v, want %s", resp.Allowed, got, tc.want)
				}
				if !strings.Contains(resp.Result.Message, tc.message) {
					t.Errorf("message %q lacks %q", resp.Result.Message, tc.message)
				}
			}
			if ev.last == nil || ev.last.Tenant == nil || ev.last.Tenant.ID != "acme" || ev.last.Policy == nil || ev.last.Pod.Namespace != tenantNS {
				t.Errorf("evaluator asked %+v", ev.last)
			}
		})
	}
}

func TestEvaluatorRequired(t *testing.T) {
	if _, err := New(Config{PoolLabel: pool, Cluster: newFakeCluster()}); err == nil || !strings.Contains(err.Error(), "evaluator is required") {
		t.Errorf("New without an evaluator: %v, want an error", err)
	}
}

func TestLookupFailures(t *testing.T) {
	c := newFakeCluster()
	c.err = errBoom
	v := newValidator(t, c, &fakeEvaluator{verdict: allowVerdict()})
	resp := post(t, v.PodsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", makePod(plainNS).obj(), nil))
	if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonLookupFailed)}) {
		t.Errorf("allowed=%v codes=%v, want LOOKUP_FAILED", resp.Allowed, got)
	}
	c.err, c.synced = nil, false
	resp = post(t, v.PodsHandler(), request(t, "pods", "", admissionv1.Create, plainNS, "u", makePod(plainNS).obj(), nil))
	if got := codes(resp); resp.Allowed || !slices.Equal(got, []string{string(guard.ReasonLookupFailed)}) || !strings.Contains(resp.Result.Message, "synced") {
		t.Errorf("before sync: allowed=%v codes=%v %v", resp.Allowed, got, resp.Result)
	}
}
