package gen

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// modFile is what a go.mod or go.work says about where modules are.
type modFile struct {
	module   string           // the module line of a go.mod
	requires []module.Version // the require lines of a go.mod
	replaces []modReplace
	uses     []string // the use lines of a go.work, as directories
}

// modReplace is "old [version] => new [version]"; new is a directory when it has no version.
type modReplace struct {
	old string
	new module.Version
}

// readModFile reads a go.mod, or a go.work when the name ends in .work, with
// golang.org/x/mod/modfile.
// An unreadable file says nothing: naming fewer modules only means that outboxgen finds less
// source, and go build still has the last word.
// A go.mod that the strict parser refuses, such as one with a directive newer than this
// outboxgen, is read leniently: its module and requires, without its replacements.
func readModFile(p string) modFile {
	var mf modFile
	data, err := os.ReadFile(p)
	if err != nil {
		return mf
	}
	if strings.HasSuffix(p, ".work") {
		wf, err := modfile.ParseWork(p, data, nil)
		if err != nil {
			return mf
		}
		for _, u := range wf.Use {
			mf.uses = append(mf.uses, filepath.FromSlash(u.Path))
		}
		mf.replaces = replacesOf(wf.Replace)
		return mf
	}
	f, err := modfile.Parse(p, data, nil)
	if err != nil {
		if f, err = modfile.ParseLax(p, data, nil); err != nil {
			return mf
		}
	}
	if f.Module != nil {
		mf.module = f.Module.Mod.Path
	}
	for _, r := range f.Require {
		mf.requires = append(mf.requires, r.Mod)
	}
	mf.replaces = replacesOf(f.Replace)
	return mf
}

func replacesOf(rs []*modfile.Replace) []modReplace {
	out := make([]modReplace, len(rs))
	for i, r := range rs {
		out[i] = modReplace{old: r.Old.Path, new: r.New}
	}
	return out
}

// names lists the module paths the file names: its module, what it requires, and what it
// replaces.
func (mf modFile) names() []string {
	var out []string
	if mf.module != "" {
		out = append(out, mf.module)
	}
	for _, r := range mf.requires {
		out = append(out, r.Path)
	}
	for _, r := range mf.replaces {
		out = append(out, r.old)
	}
	return out
}

// dir is where the replacement's source is: a directory relative to base, or the module cache.
func (r modReplace) dir(base, cache string) string {
	if r.new.Version == "" {
		if filepath.IsAbs(r.new.Path) {
			return r.new.Path
		}
		return filepath.Join(base, filepath.FromSlash(r.new.Path))
	}
	return cacheDir(cache, r.new)
}

// cacheDir is where the module cache keeps m's source, or "" when there is no cache or m's path
// or version cannot be escaped.
func cacheDir(cache string, m module.Version) string {
	if cache == "" {
		return ""
	}
	p, err := module.EscapePath(m.Path)
	if err != nil {
		return ""
	}
	v, err := module.EscapeVersion(m.Version)
	if err != nil {
		return ""
	}
	return filepath.Join(cache, p+"@"+v)
}

// goWork returns the go.work that applies to dir: $GOWORK, or the nearest one above; "" when
// GOWORK=off or there is none.
func goWork(dir string) string {
	switch w := os.Getenv("GOWORK"); w {
	case "off":
		return ""
	case "":
		return findUp(dir, "go.work")
	default:
		return w
	}
}

// modCache is the module cache: $GOMODCACHE, else the first GOPATH entry's pkg/mod.
func modCache() string {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return c
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	if first := filepath.SplitList(gopath); len(first) > 0 && first[0] != "" {
		return filepath.Join(first[0], "pkg", "mod")
	}
	return ""
}

// findUp returns the path of the file name in dir or its nearest parent that has one, or "".
func findUp(dir, name string) string {
	for {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
