// Command releasecheck proves that the repository's modules can be installed at the release
// version (runtime/outbox.Version) by a module outside the repository, with no replace
// directive: it checks each go.mod and import (lint), builds a file-system module proxy of the
// working tree at that version, then, in a fresh module in a temporary directory, go gets the
// root module and every published extra module from that proxy (and the public one), runs the
// generator from a tool directive, builds every package and runs a program that uses each
// module. scripts/release-check runs it; docs/development.md says when.
//
//	releasecheck [-root DIR] [-keep] [-lint]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	root := flag.String("root", "../..", "the repository's root directory")
	keep := flag.Bool("keep", false, "keep the proxy and the trial module (their directory is printed)")
	lintOnly := flag.Bool("lint", false, "only check the go.mod files, imports and go.work")
	flag.Parse()
	if err := run(*root, *keep, *lintOnly, func(s string) { fmt.Println("release-check:", s) }); err != nil {
		fmt.Fprintln(os.Stderr, "release-check: FAILED:", err)
		os.Exit(1)
	}
}

// run is the whole check; step reports progress.
func run(root string, keep, lintOnly bool, step func(string)) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	version, err := readVersion(root)
	if err != nil {
		return err
	}
	mods, err := findModules(root)
	if err != nil {
		return err
	}
	var published []string
	for _, m := range mods {
		if m.Publish {
			published = append(published, m.Path)
		}
	}
	step(fmt.Sprintf("release %s of %s", version, strings.Join(published, ", ")))
	problems := lint(root, version, mods)
	for _, m := range mods {
		if m.Publish && !covered[m.Dir] {
			problems = append(problems, fmt.Sprintf("%s/go.mod: module %s is published, but the trial program does not use it: add it to scripts/releasecheck/trial.go (or to unpublished in modules.go)", m.Dir, m.Path))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("%d problem(s) would break installing %s from outside the repository:\n  %s",
			len(problems), version, strings.Join(problems, "\n  "))
	}
	step("go.mod files, imports and go.work: ok")
	if lintOnly {
		return nil
	}

	tmp, err := os.MkdirTemp("", "outboxgen-release-check-")
	if err != nil {
		return err
	}
	modcache := filepath.Join(tmp, "modcache")
	if keep {
		step("keeping " + tmp)
	} else {
		defer func() {
			// The module cache is read-only: go clean -modcache removes it.
			clean := exec.Command("go", "clean", "-modcache")
			clean.Env = append(os.Environ(), "GOMODCACHE="+modcache, "GOWORK=off")
			_ = clean.Run()
			_ = os.RemoveAll(tmp)
		}()
	}
	proxyDir := filepath.Join(tmp, "proxy")
	step("module proxy of the working tree at " + version + ": " + proxyDir)
	if err := buildProxy(root, proxyDir, version, mods); err != nil {
		return fmt.Errorf("build the module proxy: %w", err)
	}
	t, err := newTrial(filepath.Join(tmp, "trial"), proxyDir, modcache)
	if err != nil {
		return err
	}
	if err := t.install(version, mods, step); err != nil {
		return err
	}
	step("ok: every published module installs at " + version + " from outside the repository")
	return nil
}
