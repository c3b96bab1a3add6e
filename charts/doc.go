// Package charts holds the render tests of the Helm charts under this
// directory: golden files, the orchestrator integration contract and the
// orchestrator profiles of ../profiles.
package charts
