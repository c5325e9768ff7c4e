package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// buildProxy writes a file-system module proxy (GOPROXY=file://dir) that serves every published
// module at version from the working tree: for each, @v/list, VERSION.info, VERSION.mod (its
// go.mod) and VERSION.zip, made as the public proxy makes it (zip.CreateFromDir leaves out
// nested modules, vendor directories and version-control files).
func buildProxy(root, dir, version string, mods []*mod) error {
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	for _, m := range mods {
		if !m.Publish {
			continue
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		files := map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": m.GoMod}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
		f, err := os.Create(filepath.Join(vdir, version+".zip"))
		if err != nil {
			return err
		}
		err = zip.CreateFromDir(f, module.Version{Path: m.Path, Version: version}, filepath.Join(root, filepath.FromSlash(m.Dir)))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
