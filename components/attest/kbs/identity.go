package kbs

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/xila-guard/xila-guard/components/api/guard"
	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// The user extra keys with which the API server names a bound token's pod
// and node.
const (
	extraPodName  = "authentication.kubernetes.io/pod-name"
	extraPodUID   = "authentication.kubernetes.io/pod-uid"
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraNodeUID  = "authentication.kubernetes.io/node-uid"
)

// TokenReviewer verifies a service-account token for the broker's
// audience.
type TokenReviewer interface {
	Review(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error)
}

// TokenReviews asks the API server (TokenReview).
type TokenReviews struct {
	// Client creates TokenReviews.
	Client client.Client
}

var _ TokenReviewer = TokenReviews{}

// Review implements TokenReviewer.
func (t TokenReviews) Review(ctx context.Context, token string) (authenticationv1.TokenReviewStatus, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
		Token: token, Audiences: []string{guard.KeyBrokerAudience}}}
	if err := t.Client.Create(ctx, tr); err != nil {
		return authenticationv1.TokenReviewStatus{}, fmt.Errorf("reviewing the token: %w", err)
	}
	return tr.Status, nil
}

// identify turns a token review into the pod and node it names, or says
// why it names none.
func identify(st authenticationv1.TokenReviewStatus) (*identity, string) {
	if !st.Authenticated {
		if st.Error != "" {
			return nil, "the token does not authenticate: " + st.Error
		}
		return nil, "the token does not authenticate"
	}
	if !slices.Contains(st.Audiences, guard.KeyBrokerAudience) {
		return nil, "the token is not for the audience " + guard.KeyBrokerAudience
	}
	parts := strings.Split(st.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return nil, fmt.Sprintf("the token is %s's, not a service account's", st.User.Username)
	}
	one := func(key string) string {
		if v := st.User.Extra[key]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	who := &identity{namespace: parts[2], serviceAccount: parts[3],
		pod: one(extraPodName), podUID: types.UID(one(extraPodUID)),
		node: one(extraNodeName), nodeUID: types.UID(one(extraNodeUID))}
	if who.pod == "" || who.podUID == "" {
		return nil, "the token is not bound to a pod: use a projected service-account token"
	}
	if who.node == "" || who.nodeUID == "" {
		return nil, "the token names no node: use a projected token of a pod bound to a node"
	}
	return who, ""
}

// live is what a decision reads from the API server: the token's pod,
// its node and the node's evidence, read at once.
type live struct {
	pod     *corev1.Pod
	podErr  error
	node    *corev1.Node
	nodeErr error
	nss     *v1alpha1.NodeSecurityState
	nssErr  error
}

// readLive reads the identity's pod, node and evidence concurrently: one
// round trip to the API server instead of three.
func (b *Broker) readLive(ctx context.Context, who *identity) *live {
	l := &live{pod: &corev1.Pod{}, node: &corev1.Node{}, nss: &v1alpha1.NodeSecurityState{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		l.podErr = b.opts.Live.Get(ctx, client.ObjectKey{Namespace: who.namespace, Name: who.pod}, l.pod)
	})
	wg.Go(func() { l.nodeErr = b.opts.Live.Get(ctx, client.ObjectKey{Name: who.node}, l.node) })
	wg.Go(func() { l.nssErr = b.opts.Live.Get(ctx, client.ObjectKey{Name: who.node}, l.nss) })
	wg.Wait()
	return l
}

// whereabouts checks that the identity's pod still runs, on the
// identity's node, and that the request comes from one of its IPs. It
// returns the pod and node, or a refusal with the pod when it was read and
// is the token's, for the Event.
func (b *Broker) whereabouts(l *live, who *identity, peer string) (*corev1.Pod, *corev1.Node, *refusal) {
	pod, err := l.pod, l.podErr
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, refuse(http.StatusForbidden, guard.ReasonPodMismatch, "pod %s/%s no longer exists", who.namespace, who.pod)
	case err != nil:
		return nil, nil, unavailable("reading pod %s/%s: %v", who.namespace, who.pod, err)
	case pod.UID != who.podUID:
		return nil, nil, refuse(http.StatusForbidden, guard.ReasonPodMismatch, "pod %s/%s is another pod (UID %s) than the token's (UID %s)", who.namespace, who.pod, pod.UID, who.podUID)
	case pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonPodMismatch, "pod %s/%s is finished or being deleted", who.namespace, who.pod)
	case pod.Spec.NodeName != who.node:
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonPodMismatch, "pod %s/%s is bound to node %q, the token names node %s", who.namespace, who.pod, pod.Spec.NodeName, who.node)
	case pod.Spec.ServiceAccountName != who.serviceAccount:
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonPodMismatch, "pod %s/%s runs as service account %s, the token is %s's", who.namespace, who.pod, pod.Spec.ServiceAccountName, who.serviceAccount)
	}
	if len(pod.Status.PodIPs) == 0 && !pod.Spec.HostNetwork {
		// The kubelet records a pod's IPs only once its sandbox runs; a
		// container that asks for its key at once can be ahead of it.
		// Nothing is released, and the client may ask again.
		return pod, nil, unavailable("pod %s/%s has no IP on record yet; try again", who.namespace, who.pod)
	}
	if !hasIP(pod, peer) {
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonPeerMismatch, "the request comes from %s, which is not an IP of pod %s/%s", peer, who.namespace, who.pod)
	}
	node, err := l.node, l.nodeErr
	switch {
	case apierrors.IsNotFound(err):
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonNodeChanged, "node %s no longer exists", who.node)
	case err != nil:
		return pod, nil, unavailable("reading node %s: %v", who.node, err)
	case node.UID != who.nodeUID:
		return pod, nil, refuse(http.StatusForbidden, guard.ReasonNodeChanged, "node %s was replaced: UID %s, the token names %s", who.node, node.UID, who.nodeUID)
	}
	return pod, node, nil
}

// hasIP reports whether the address is one of the pod's IPs. A pod on the
// node's network shares the node's address and cannot be told from the
// node's other processes, so it never matches.
func hasIP(pod *corev1.Pod, addr string) bool {
	ip := net.ParseIP(addr)
	if ip == nil || pod.Spec.HostNetwork {
		return false
	}
	for _, p := range pod.Status.PodIPs {
		if q := net.ParseIP(p.IP); q != nil && q.Equal(ip) {
			return true
		}
	}
	return false
}

// RemoteAddress is the default peer address: the host of the request's
// RemoteAddr, the TCP peer.
func RemoteAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
