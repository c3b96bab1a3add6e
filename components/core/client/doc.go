// Package client calls the xila-guard-core evaluator for other components.
//
// It is fail-closed by construction: Evaluate returns either a complete,
// consistent answer — one valid decision for every requested node and none
// for any other — or an error. A timeout, a refused connection, a non-200
// status, an undecodable body or an answer that does not match the request
// are all errors, and callers must treat an error as a refusal. The
// sentinel errors tell the causes apart for messages and metrics:
//
//	ev, err := c.Evaluate(ctx, req)
//	if errors.Is(err, client.ErrTimeout) { ... }
//	if err != nil || !ev.Allowed(nodeName) { refuse }
package client
