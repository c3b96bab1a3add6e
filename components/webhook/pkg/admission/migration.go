package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// MigrationsPath judges KubeVirt's VirtualMachineInstanceMigrations.
const MigrationsPath = "/validate-migrations"

// RuleMigration is the rule a VirtualMachineInstanceMigration of a
// protected namespace obeys.
const RuleMigration = "protected-migration"

// KubeVirt's names, as its API (kubevirt.io/client-go) spells them. Only
// these are read: no KubeVirt Go type is imported.
const (
	kubevirtGroup      = "kubevirt.io"
	migrationsResource = "virtualmachineinstancemigrations"
	migrationKind      = "VirtualMachineInstanceMigration"
	// MigrationJobUIDLabel is the label KubeVirt's controller puts on a
	// migration's target pod, its value the migration's UID.
	MigrationJobUIDLabel = "kubevirt.io/migrationJobUID"
)

// migration is the part of a VirtualMachineInstanceMigration the rule
// reads (kubevirt.io/v1, KubeVirt v1.7).
type migration struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name         string `json:"name"`
		GenerateName string `json:"generateName"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

// migrationSpec is spec of a VirtualMachineInstanceMigration.
// addedNodeSelector is merged by KubeVirt's controller into the node
// selector of the target pod; sendTo hands the VMI's state to another
// cluster (decentralized live migration), receive takes one in.
type migrationSpec struct {
	VMIName           string            `json:"vmiName"`
	AddedNodeSelector map[string]string `json:"addedNodeSelector"`
	SendTo            *struct {
		ConnectURL  string `json:"connectURL"`
		MigrationID string `json:"migrationID"`
	} `json:"sendTo"`
}

// MigrationsHandler serves MigrationsPath.
func (v *Validator) MigrationsHandler() http.Handler {
	return v.handler(v.validateMigration)
}

// validateMigration judges a VirtualMachineInstanceMigration CREATE or
// UPDATE. In a protected namespace a migration must keep its target in
// the tenant's own pool: spec.addedNodeSelector names the pool label with
// the tenant's pool (other keys only narrow the choice and are allowed),
// and it sends the VMI to no other cluster (spec.sendTo). The target pod
// that KubeVirt's controller then creates is a protected pod of the
// namespace and obeys the pod rules; this rule keeps the migration's own
// request in the pool, so that KubeVirt asks only for nodes the
// controlled scheduler may choose. An UPDATE that leaves the spec as it
// was (labels, finalizers) is allowed.
func (v *Validator) validateMigration(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if req.Resource.Group != kubevirtGroup || req.Resource.Resource != migrationsResource || req.SubResource != "" {
		return unexpected("request", "this endpoint judges %s.%s, got resource %s", migrationsResource, kubevirtGroup, resourceString(req))
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return unexpected("request", "operation %s on %s; only CREATE and UPDATE are judged", req.Operation, migrationsResource)
	}
	m, spec, err := decodeMigration(req.Object.Raw)
	if err != nil {
		return unexpected("request", "%v", err)
	}
	ns := req.Namespace
	name := m.Metadata.Name
	if name == "" {
		name = req.Name
	}
	if name == "" {
		name = m.Metadata.GenerateName + "*"
	}
	subject := fmt.Sprintf("migration %s/%s of VMI %s", ns, name, spec.VMIName)
	if req.Operation == admissionv1.Update {
		old, _, err := decodeMigration(req.OldObject.Raw)
		if err != nil {
			return unexpected("request", "oldObject: %v", err)
		}
		if sameSpec(m.Spec, old.Spec) {
			return outcome{}
		}
	}
	id, err := v.cfg.Cluster.Identity(ctx, ns)
	if err != nil {
		return deny(subject, violation{RuleLookup, guard.ReasonLookupFailed, "metadata.namespace",
			fmt.Sprintf("cannot tell whether namespace %s belongs to a tenant: %v", ns, err)})
	}
	if !id.Protected {
		return outcome{}
	}
	if id.Tenant == nil {
		detail := "the migration's tenant cannot be resolved, so neither can the pool its target must stay in"
		if id.Note != "" {
			detail += ": " + id.Note
		}
		return deny(subject, violation{RuleMigration, guard.ReasonTenantUnresolved, "metadata.namespace", detail})
	}
	return deny(subject, v.migrationViolations(spec, id.Tenant.PoolName())...)
}

// migrationViolations are the ways a migration's target could leave pool.
func (v *Validator) migrationViolations(spec *migrationSpec, pool string) []violation {
	key := v.cfg.PoolLabel
	var out []violation
	if spec.SendTo != nil {
		out = append(out, violation{RuleMigration, guard.ReasonMigrationOutsidePool, "spec.sendTo",
			fmt.Sprintf("spec.sendTo hands the VMI's state to %q, outside the cluster, where the tenant's pool and the attestation of its nodes are not enforced", spec.SendTo.ConnectURL)})
	}
	want := fmt.Sprintf("spec.addedNodeSelector must hold %s: %s", key, pool)
	switch got, ok := spec.AddedNodeSelector[key]; {
	case !ok:
		out = append(out, violation{RuleMigration, guard.ReasonMigrationOutsidePool, "spec.addedNodeSelector",
			fmt.Sprintf("the migration does not constrain its target to the tenant's pool (%s); %s", pool, want)})
	case got != pool:
		out = append(out, violation{RuleMigration, guard.ReasonMigrationOutsidePool, "spec.addedNodeSelector",
			fmt.Sprintf("spec.addedNodeSelector %s=%s names a pool other than the tenant's own (%s); %s", key, got, pool, want)})
	}
	return out
}

// decodeMigration reads a VirtualMachineInstanceMigration; it must be
// present, of the kind, and its spec must decode.
func decodeMigration(raw []byte) (*migration, *migrationSpec, error) {
	if len(raw) == 0 {
		return nil, nil, fmt.Errorf("the request carries no %s object", migrationKind)
	}
	m := &migration{}
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, nil, fmt.Errorf("decoding the %s object: %w", migrationKind, err)
	}
	if m.Kind != "" && m.Kind != migrationKind {
		return nil, nil, fmt.Errorf("the object is a %s, want %s", m.Kind, migrationKind)
	}
	spec := &migrationSpec{}
	if len(m.Spec) > 0 && !bytes.Equal(m.Spec, []byte("null")) {
		if err := json.Unmarshal(m.Spec, spec); err != nil {
			return nil, nil, fmt.Errorf("decoding the %s spec: %w", migrationKind, err)
		}
	}
	return m, spec, nil
}

// sameSpec reports whether two encoded specs hold the same values.
func sameSpec(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &x); err != nil {
			return false
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &y); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(x, y)
}
