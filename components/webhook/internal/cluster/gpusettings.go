package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	gpuv1alpha1 "github.com/xila-guard/xila-guard/components/api/gpu/v1alpha1"
	"github.com/xila-guard/xila-guard/components/webhook/pkg/admission"
)

// GPUSettings reads the GPU controller's settings ConfigMap from an
// informer cache that watches that one object. It implements
// admission.GPUSettings.
type GPUSettings struct {
	factory   informers.SharedInformerFactory
	store     cache.Store
	synced    cache.InformerSynced
	namespace string
}

var _ admission.GPUSettings = (*GPUSettings)(nil)

// NewGPUSettings builds the informer of the ConfigMap in namespace; Start
// runs it.
func NewGPUSettings(kube kubernetes.Interface, namespace string) *GPUSettings {
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", gpuv1alpha1.SettingsConfigMap).String()
		}))
	inf := f.Core().V1().ConfigMaps().Informer()
	return &GPUSettings{factory: f, store: inf.GetStore(), synced: inf.HasSynced, namespace: namespace}
}

// Start runs the informer until ctx is done.
func (g *GPUSettings) Start(ctx context.Context) { g.factory.Start(ctx.Done()) }

// Synced reports whether the cache has been filled once.
func (g *GPUSettings) Synced() bool { return g.synced() }

// GPUSettings returns the ConfigMap's data, and false before the cache
// has synced or while the ConfigMap does not exist.
func (g *GPUSettings) GPUSettings() (map[string]string, bool) {
	if !g.synced() {
		return nil, false
	}
	obj, ok, err := g.store.GetByKey(g.namespace + "/" + gpuv1alpha1.SettingsConfigMap)
	if err != nil || !ok {
		return nil, false
	}
	return obj.(*corev1.ConfigMap).Data, true
}
