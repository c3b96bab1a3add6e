package guardclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/xila-guard/xila-guard/components/api/v1alpha1"
)

// server answers every GET with one object or list as JSON and records
// what it was asked.
type server struct {
	paths   []string
	queries []string
	accepts []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.paths = append(s.paths, r.URL.Path)
	s.queries = append(s.queries, r.URL.RawQuery)
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	w.Header().Set("Content-Type", "application/json")
	var body any
	switch r.URL.Path {
	case "/apis/guard.xila.us/v1alpha1/placementpolicies/strict":
		body = &v1alpha1.PlacementPolicy{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PlacementPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: "strict", ResourceVersion: "7"}}
	case "/apis/guard.xila.us/v1alpha1/nodesecuritystates/gpu-1":
		body = &v1alpha1.NodeSecurityState{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeSecurityState"},
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}, Spec: v1alpha1.NodeSecurityStateSpec{Incarnation: "i1"}}
	case "/apis/guard.xila.us/v1alpha1/tenantbindings":
		body = &v1alpha1.TenantBindingList{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TenantBindingList"},
			Items: []v1alpha1.TenantBinding{{ObjectMeta: metav1.ObjectMeta{Name: "acme"}, Spec: v1alpha1.TenantBindingSpec{TenantID: "acme"}}}}
	default:
		w.WriteHeader(http.StatusNotFound)
		body = &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound}
	}
	_ = json.NewEncoder(w).Encode(body)
}

func newClient(t *testing.T) (*Client, *server) {
	t.Helper()
	s := &server{}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := New(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, s
}

func TestReads(t *testing.T) {
	c, s := newClient(t)
	ctx := context.Background()
	p, err := c.PlacementPolicy(ctx, "strict")
	if err != nil || p.Name != "strict" || p.ResourceVersion != "7" {
		t.Errorf("PlacementPolicy(strict) = %+v, %v", p.ObjectMeta, err)
	}
	st, err := c.NodeSecurityState(ctx, "gpu-1")
	if err != nil || st.Name != "gpu-1" || st.Spec.Incarnation != "i1" {
		t.Errorf("NodeSecurityState(gpu-1) = %+v, %v", st, err)
	}
	if _, err := c.PlacementPolicy(ctx, "gone"); err == nil {
		t.Error("PlacementPolicy(gone) succeeded, want an error")
	}
	for _, a := range s.accepts {
		if a != "application/json" {
			t.Errorf("Accept %q, want application/json: custom resources have no protobuf encoding", a)
		}
	}
}

func TestListWatch(t *testing.T) {
	c, s := newClient(t)
	lw, object, err := c.ListWatch(TenantBindings)
	if err != nil {
		t.Fatalf("ListWatch: %v", err)
	}
	if _, ok := object.(*v1alpha1.TenantBinding); !ok {
		t.Errorf("object is %T, want *v1alpha1.TenantBinding", object)
	}
	list, err := cache.ToListerWatcherWithContext(lw).ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	bindings, ok := list.(*v1alpha1.TenantBindingList)
	if !ok || len(bindings.Items) != 1 || bindings.Items[0].Spec.TenantID != "acme" {
		t.Fatalf("List = %#v, want the acme binding", list)
	}
	if diff := cmp.Diff([]string{"/apis/guard.xila.us/v1alpha1/tenantbindings"}, s.paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"resourceVersion=0"}, s.queries); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
}

func TestListWatchKinds(t *testing.T) {
	c, _ := newClient(t)
	for resource, want := range map[string]any{
		NodeSecurityStates: &v1alpha1.NodeSecurityState{},
		TenantBindings:     &v1alpha1.TenantBinding{},
		PlacementPolicies:  &v1alpha1.PlacementPolicy{},
	} {
		_, object, err := c.ListWatch(resource)
		if err != nil {
			t.Errorf("ListWatch(%s): %v", resource, err)
			continue
		}
		if diff := cmp.Diff(want, any(object)); diff != "" {
			t.Errorf("ListWatch(%s) object (-want +got):\n%s", resource, diff)
		}
	}
	if _, _, err := c.ListWatch("pods"); err == nil {
		t.Error("ListWatch(pods) succeeded, want an error")
	}
}
