package enforcer

import "github.com/xila-guard/xila-guard/components/agent/dataplane"

var _ Dataplane = (*dataplane.Dataplane)(nil)
