// Package platform installs, upgrades, reads and uninstalls the xila-guard
// chart through the Helm library, and turns what an operator writes
// (values YAML, orchestrator profiles by name, feature switches) into the
// chart's values, with errors that name the field at fault.
package platform
