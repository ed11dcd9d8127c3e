package testbed

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
)

// The version the Go side looks for is the one scripts/seaweedfs.sh builds.
func TestSeaweedFSVersionMatchesScript(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "scripts", "seaweedfs.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION=\$\{VERSION:-(\S+)\}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/seaweedfs.sh sets no default VERSION")
	}
	if got := string(m[1]); got != SeaweedFSVersion {
		t.Errorf("scripts/seaweedfs.sh builds %s, SeaweedFSVersion is %s", got, SeaweedFSVersion)
	}
}
