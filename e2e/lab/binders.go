package lab

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// GrantBinding lets service accounts (system:serviceaccount:<ns>:<name>)
// bind pods, as an external scheduler's own RBAC would; name names the
// ClusterRole and its binding.
func (c *Cluster) GrantBinding(ctx context.Context, name string, accounts ...string) error {
	_ = c.RevokeBinding(ctx, name)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods/binding"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	if _, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
	}
	for _, a := range accounts {
		parts := strings.Split(a, ":")
		if len(parts) != 4 {
			return fmt.Errorf("%q is not system:serviceaccount:<namespace>:<name>", a)
		}
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: parts[2], Name: parts[3]})
	}
	_, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	return err
}

// RevokeBinding removes what GrantBinding made.
func (c *Cluster) RevokeBinding(ctx context.Context, name string) error {
	err1 := c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
	err2 := c.Kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	for _, err := range []error{err1, err2} {
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// AsServiceAccount returns a client acting as a service account user.
func (c *Cluster) AsServiceAccount(account string) (kubernetes.Interface, error) {
	parts := strings.Split(account, ":")
	if len(parts) != 4 {
		return nil, fmt.Errorf("%q is not system:serviceaccount:<namespace>:<name>", account)
	}
	kube, _, err := c.As(account, "system:serviceaccounts", "system:serviceaccounts:"+parts[2])
	return kube, err
}
