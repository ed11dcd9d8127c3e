package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

func init() {
	register("version", command{summary: "print shoal's version, its commit and the Go it was built with", run: versionCmd})
}

// version and commit are set at build time by the Makefile:
//
//	go build -ldflags "-X main.version=0.1.0 -X main.commit=$(git describe --always --dirty)"
//
// version is the release, shoal.h's SHOAL_VERSION_*, and GET /v1/health
// reports it; commit is git's name for the tree built. A plain go build leaves
// version at its default and commit empty: commit then comes from the module's
// build information (vcs.revision), when go stamped it.
var (
	version = "0.1.0-dev"
	commit  string
)

// versionLine is the one line shoal --version prints, from the build-time values
// and the build information (nil when there is none).
func versionLine(version, commit string, info *debug.BuildInfo) string {
	if version == "" {
		version = "devel"
	}
	goVersion := runtime.Version()
	if info != nil {
		goVersion = info.GoVersion
		if commit == "" {
			commit = vcsCommit(info.Settings)
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("shoal %s (commit %s, %s, %s/%s)", version, commit, goVersion, runtime.GOOS, runtime.GOARCH)
}

// vcsCommit is the commit go build stamped, shortened as git shows it, with
// "-dirty" when the tree had changes: "" when it stamped none.
func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

const versionUsage = `Usage: shoal version

Prints one line: shoal's release, the commit it was built from ("-dirty" when
the tree had changes), and the Go version and platform of the build. shoal
--version prints the same.
`

func versionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, versionUsage)
		return exitOK
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "shoal version: takes no arguments, got %q (see 'shoal version --help')\n", args)
		return exitUsage
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(version, commit, info))
	return exitOK
}
