package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the Policy Report API.
const GroupName = "wgpolicyk8s.io"

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

var (
	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &PolicyReport{}, &PolicyReportList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
