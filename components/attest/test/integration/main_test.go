//go:build integration

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/xila-guard/xila-guard/components/api/testenv"
)

// The test environment, shared by every test of the package.
var (
	k8s client.Client
	// controllerConfig reaches the API server as the controller's service
	// account, bound to the generated ClusterRole and nothing else.
	controllerConfig *rest.Config
)

// controllerUser is the controller's service account, brokerUser the key
// broker's.
const (
	controllerUser = "system:serviceaccount:xila-guard-system:xila-guard-attest"
	brokerUser     = "system:serviceaccount:xila-guard-system:xila-guard-kbs"
	teeUser        = "system:serviceaccount:xila-guard-system:xila-guard-tee-resources"
)

// brokerConfig reaches the API server as the key broker, bound to its
// generated ClusterRole and to a Role reading Secrets in xila-guard-system.
var brokerConfig *rest.Config

// teeConfig reaches the API server as the TEE resource agent, bound to its
// generated ClusterRole.
var teeConfig *rest.Config

// stopController stops the shared controller, when one runs.
var stopController = func() {}

// TestMain is testenv.Main, but stops the shared controller before the API
// server, so that it does not spend its last seconds failing to renew its
// lease.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	defer e.Stop()
	k8s = e.Client
	if controllerConfig, err = bindGeneratedRole(e.Environment, "rbac", controllerUser); err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	if brokerConfig, err = bindGeneratedRole(e.Environment, "kbs-rbac", brokerUser); err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	if teeConfig, err = bindGeneratedRole(e.Environment, "teeresources-rbac", teeUser); err != nil {
		fmt.Fprintf(os.Stderr, "integration tests cannot run: %v\n", err)
		return 1
	}
	defer func() { stopController() }()
	return m.Run()
}

// bindGeneratedRole binds config/<dir>/role.yaml to user and returns that
// user's config.
func bindGeneratedRole(env *envtest.Environment, dir, user string) (*rest.Config, error) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", dir, "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(data, role); err != nil {
		return nil, fmt.Errorf("config/%s/role.yaml: %w", dir, err)
	}
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	u, err := env.AddUser(envtest.User{Name: user}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
