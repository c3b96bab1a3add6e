package cluster

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// GPUSettings reads the GPU controller's GPUSettings from an informer
// cache that watches that one object. It implements admission.GPUSettings.
type GPUSettings struct {
	factory   dynamicinformer.DynamicSharedInformerFactory
	store     cache.Store
	synced    cache.InformerSynced
	namespace string
}

var _ admission.GPUSettings = (*GPUSettings)(nil)

// NewGPUSettings builds the informer of the settings in namespace; Start
// runs it.
func NewGPUSettings(dyn dynamic.Interface, namespace string) *GPUSettings {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", gpuv1alpha1.SettingsName).String()
	})
	inf := f.ForResource(gpuv1alpha1.GroupVersion.WithResource("gpusettings")).Informer()
	return &GPUSettings{factory: f, store: inf.GetStore(), synced: inf.HasSynced, namespace: namespace}
}

// Start runs the informer until ctx is done.
func (g *GPUSettings) Start(ctx context.Context) { g.factory.Start(ctx.Done()) }

// Synced reports whether the cache has been filled once.
func (g *GPUSettings) Synced() bool { return g.synced() }

// GPUSettings returns the settings, and false before the cache has synced,
// while they do not exist, or when they cannot be read.
func (g *GPUSettings) GPUSettings() (*gpuv1alpha1.GPUSettingsSpec, bool) {
	if !g.synced() {
		return nil, false
	}
	obj, ok, err := g.store.GetByKey(g.namespace + "/" + gpuv1alpha1.SettingsName)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false
	}
	s := &gpuv1alpha1.GPUSettings{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return nil, false
	}
	return &s.Spec, true
}
