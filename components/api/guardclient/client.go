package guardclient

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// Resource names of the three kinds.
const (
	NodeSecurityStates = "nodesecuritystates"
	TenantBindings     = "tenantbindings"
	PlacementPolicies  = "placementpolicies"
)

// Client reads guard.xila.us/v1alpha1 objects. It is safe for concurrent use.
type Client struct {
	rest rest.Interface
}

// New returns a Client for the API server of cfg. The copy it makes asks
// for JSON, since custom resources have no protobuf encoding.
func New(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering %s: %w", v1alpha1.GroupVersion, err)
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", v1alpha1.GroupVersion, err)
	}
	return &Client{rest: rc}, nil
}

// NodeSecurityState reads the named NodeSecurityState.
func (c *Client) NodeSecurityState(ctx context.Context, name string) (*v1alpha1.NodeSecurityState, error) {
	out := &v1alpha1.NodeSecurityState{}
	return out, c.get(ctx, NodeSecurityStates, name, out)
}

// PlacementPolicy reads the named PlacementPolicy.
func (c *Client) PlacementPolicy(ctx context.Context, name string) (*v1alpha1.PlacementPolicy, error) {
	out := &v1alpha1.PlacementPolicy{}
	return out, c.get(ctx, PlacementPolicies, name, out)
}

func (c *Client) get(ctx context.Context, resource, name string, into runtime.Object) error {
	// The error of a failed request already names the resource and object.
	return c.rest.Get().Resource(resource).Name(name).Do(ctx).Into(into)
}

// ListWatch returns a list-watch of one of the three resources, for an
// informer whose objects are of the kind's Go type.
func (c *Client) ListWatch(resource string) (cache.ListerWatcher, runtime.Object, error) {
	var list func() runtime.Object
	var object runtime.Object
	switch resource {
	case NodeSecurityStates:
		list, object = func() runtime.Object { return &v1alpha1.NodeSecurityStateList{} }, &v1alpha1.NodeSecurityState{}
	case TenantBindings:
		list, object = func() runtime.Object { return &v1alpha1.TenantBindingList{} }, &v1alpha1.TenantBinding{}
	case PlacementPolicies:
		list, object = func() runtime.Object { return &v1alpha1.PlacementPolicyList{} }, &v1alpha1.PlacementPolicy{}
	default:
		return nil, nil, fmt.Errorf("unknown resource %q", resource)
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := list()
			err := c.rest.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return c.rest.Get().Resource(resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
		},
	}, object, nil
}
