// Package version holds the release version every Xila Guard binary reports.
//
// The build stamps it with
//
//	-ldflags "-X github.com/xila-guard/xila-guard/components/api/version.Version=$(git describe --tags --always --dirty)"
//
// so that one linker flag versions every component alike.
package version

// Version is the release this binary was built from. Builds that are not
// stamped report "dev".
var Version = "dev"

// Get returns Version, or "dev" when the linker stamped an empty string.
func Get() string {
	if Version == "" {
		return "dev"
	}
	return Version
}
