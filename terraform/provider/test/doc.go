// Package test runs the Terraform module and the xilaguard provider with
// the real Terraform CLI (terraform-exec) against a kind cluster of its own
// (build tag e2e; make terraform-test).
package test
