package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Result is the outcome of one check.
//
// +kubebuilder:validation:Enum=pass;fail;warn;error;skip
type Result string

// The outcomes of a check.
const (
	// ResultPass: the subject meets the policy.
	ResultPass Result = "pass"
	// ResultFail: the subject does not meet the policy.
	ResultFail Result = "fail"
	// ResultWarn: the subject does not meet a policy that is not scored.
	ResultWarn Result = "warn"
	// ResultError: the policy could not be evaluated.
	ResultError Result = "error"
	// ResultSkip: the policy was not applied to the subject.
	ResultSkip Result = "skip"
)

// Severity is how much a failed check matters.
//
// +kubebuilder:validation:Enum=critical;high;low;medium;info
type Severity string

// The severities of a check.
const (
	SeverityCritical Severity = "critical"
	SeverityHigh     Severity = "high"
	SeverityMedium   Severity = "medium"
	SeverityLow      Severity = "low"
	SeverityInfo     Severity = "info"
)

// Summary counts a report's results by outcome.
type Summary struct {
	// Pass counts the results that passed.
	// +optional
	Pass int `json:"pass"`
	// Fail counts the results that failed.
	// +optional
	Fail int `json:"fail"`
	// Warn counts the failed results of policies that are not scored.
	// +optional
	Warn int `json:"warn"`
	// Error counts the results that could not be evaluated.
	// +optional
	Error int `json:"error"`
	// Skip counts the results that were not evaluated.
	// +optional
	Skip int `json:"skip"`
}

// PolicyReportResult is the outcome of one rule of one policy for its
// subjects.
type PolicyReportResult struct {
	// Source names the engine that produced the result.
	// +optional
	Source string `json:"source"`
	// Policy names the policy.
	Policy string `json:"policy"`
	// Rule names the rule of the policy.
	// +optional
	Rule string `json:"rule,omitempty"`
	// Category groups policies.
	// +optional
	Category string `json:"category,omitempty"`
	// Severity says how much a failure matters.
	// +optional
	Severity Severity `json:"severity,omitempty"`
	// Timestamp is when the result was found.
	// +optional
	Timestamp metav1.Timestamp `json:"timestamp,omitempty"`
	// Result is the outcome.
	// +optional
	Result Result `json:"result,omitempty"`
	// Scored says whether the result counts in a score.
	// +optional
	Scored bool `json:"scored,omitempty"`
	// Subjects are the objects checked. v1alpha2 keeps the older field
	// name, resources.
	// +optional
	Subjects []corev1.ObjectReference `json:"resources,omitempty"`
	// SubjectSelector selects the objects checked, instead of Subjects.
	// With neither, the result is about the report's scope.
	// +optional
	SubjectSelector *metav1.LabelSelector `json:"resourceSelector,omitempty"`
	// Message explains the result to a person.
	// +optional
	Message string `json:"message,omitempty"`
	// Properties are further facts of the result.
	// +optional
	Properties map[string]string `json:"properties,omitempty"`
}

// PolicyReport holds the results of policies for the objects of a
// namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=polr
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.scope.kind`,priority=1
// +kubebuilder:printcolumn:name="Name",type=string,JSONPath=`.scope.name`,priority=1
// +kubebuilder:printcolumn:name="Pass",type=integer,JSONPath=`.summary.pass`
// +kubebuilder:printcolumn:name="Fail",type=integer,JSONPath=`.summary.fail`
// +kubebuilder:printcolumn:name="Warn",type=integer,JSONPath=`.summary.warn`
// +kubebuilder:printcolumn:name="Error",type=integer,JSONPath=`.summary.error`
// +kubebuilder:printcolumn:name="Skip",type=integer,JSONPath=`.summary.skip`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Scope is the one object the report is about, when it is about one.
	// +optional
	Scope *corev1.ObjectReference `json:"scope,omitempty"`
	// ScopeSelector selects the objects the report is about, instead of
	// Scope.
	// +optional
	ScopeSelector *metav1.LabelSelector `json:"scopeSelector,omitempty"`
	// Summary counts the results by outcome.
	// +optional
	Summary Summary `json:"summary,omitempty"`
	// Results are the outcomes, one per policy, rule and subject.
	// +optional
	Results []PolicyReportResult `json:"results,omitempty"`
}

// PolicyReportList is a list of PolicyReports.
//
// +kubebuilder:object:root=true
type PolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyReport `json:"items"`
}
