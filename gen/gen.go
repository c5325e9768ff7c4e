// Package gen turns an events.yaml catalog into Go code: typed payloads, EnqueueX functions,
// handler interfaces and a router over the runtime in runtime/outbox.
//
// It is a pipeline of pure stages, as sqlc and protoc-gen-go are built:
//
//	load (yaml.Node walk, keeps line:col) -> validate (every problem at once)
//	  -> model (every Go name, type and import decided) -> emit (jennifer) -> map[path][]byte
//
// Generate runs the pipeline on bytes; Write and Diff are thin wrappers that compare the result
// with the files on disk. Errors are an ErrorList in the go build shape (events.yaml:12:5: ...).
package gen

import (
	"fmt"
	"os"
	"path/filepath"
)

// Generate validates the catalog src and returns the generated files, keyed by path: the
// catalog's output: joined to the directory of catalogPath. catalogPath is also the name in
// error messages, as given (events.yaml:3:5: ...). On an invalid catalog the error is an
// ErrorList holding every problem and no file is returned. The output is deterministic.
func Generate(catalogPath string, src []byte) (map[string][]byte, error) {
	m, err := parse(catalogPath, src)
	if err != nil {
		return nil, err
	}
	code, err := emitFile(m)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{filepath.FromSlash(m.path): code}, nil
}

// Check validates the catalog src without generating code.
func Check(catalogPath string, src []byte) error {
	_, err := parse(catalogPath, src)
	return err
}

func parse(catalogPath string, src []byte) (*file, error) {
	ps := &problems{path: catalogPath}
	c := load(src, ps)
	if c != nil {
		validate(c, ps)
	}
	if len(ps.list) > 0 {
		ps.list.sort()
		return nil, ps.list
	}
	return buildModel(c, filepath.ToSlash(catalogPath)), nil
}

// GenerateFile reads the catalog at catalogPath and generates from it.
func GenerateFile(catalogPath string) (map[string][]byte, error) {
	src, err := os.ReadFile(catalogPath)
	if err != nil {
		return nil, err
	}
	return Generate(catalogPath, src)
}

// Write writes each file whose content differs from what is on disk, through a temporary
// file and a rename, so a reader never sees half a file. It returns the paths it wrote.
func Write(files map[string][]byte) ([]string, error) {
	var written []string
	for _, p := range sortedKeys(files) {
		want := files[p]
		if have, err := os.ReadFile(p); err == nil && string(have) == string(want) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return written, err
		}
		tmp, err := os.CreateTemp(filepath.Dir(p), ".outboxgen-*.tmp")
		if err != nil {
			return written, err
		}
		_, werr := tmp.Write(want)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o644)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), p)
		}
		if werr != nil {
			if rerr := os.Remove(tmp.Name()); rerr != nil && !os.IsNotExist(rerr) {
				werr = fmt.Errorf("%w (and removing %s: %v)", werr, tmp.Name(), rerr)
			}
			return written, fmt.Errorf("write %s: %w", p, werr)
		}
		written = append(written, p)
	}
	return written, nil
}

// Diff returns a unified diff from the files on disk to files, or "" when every file is
// current. A missing file diffs as empty.
func Diff(files map[string][]byte) (string, error) {
	var out string
	for _, p := range sortedKeys(files) {
		have, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		out += unifiedDiff(p, string(have), string(files[p]))
	}
	return out, nil
}
