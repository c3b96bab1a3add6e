// Package e2e is the end-to-end suite of Xila Guard. It runs on a real kind
// cluster built offline and proves each guarantee the product makes.
package e2e
