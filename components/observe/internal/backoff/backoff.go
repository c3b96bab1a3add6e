// Package backoff is how the observe controller's controllers retry a
// failed reconcile.
package backoff

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Bounds of the per-object exponential backoff.
const (
	// Base is the first retry's delay.
	Base = 5 * time.Millisecond
	// Max is the longest a failed object waits. controller-runtime's
	// default, 1000 s, would keep a node reported indeterminate, or its
	// compliance labels off, for up to a quarter of an hour after an
	// evaluator outage ended.
	Max = 30 * time.Second
)

// RateLimiter is controller-runtime's default rate limiter, an exponential
// per-object backoff and an overall token bucket, with the per-object
// delay bounded by Max.
func RateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](Base, Max),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
