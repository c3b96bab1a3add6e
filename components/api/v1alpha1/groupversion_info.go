package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: guard.GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the group-qualified resource for an unqualified name.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&PlacementPolicy{}, &PlacementPolicyList{},
		&TenantBinding{}, &TenantBindingList{},
		&NodeSecurityState{}, &NodeSecurityStateList{},
		&KeyReleasePolicy{}, &KeyReleasePolicyList{},
		&PolicyParameterSet{}, &PolicyParameterSetList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
