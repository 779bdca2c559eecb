package render

import (
	"fmt"
	"slices"
	"strings"
)

// File is one rendered file: a name relative to the directory (or ConfigMap key) it goes
// to, and its bytes.
type File struct {
	Name string
	Data []byte
}

// Files is a set of rendered files, sorted by name so that equal sets are equal slices.
type Files []File

// NewFiles sorts the files by name and refuses duplicates and names that could escape the
// directory they are written to.
func NewFiles(fs ...File) (Files, error) {
	out := slices.Clone(fs)
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range out {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\\\x00") {
			return nil, fmt.Errorf("render: file name %q must be a plain file name (no directories)", f.Name)
		}
		if i > 0 && out[i-1].Name == f.Name {
			return nil, fmt.Errorf("render: file %q rendered twice", f.Name)
		}
	}
	return Files(out), nil
}

// Get returns the file named name.
func (fs Files) Get(name string) (File, bool) {
	i, ok := slices.BinarySearchFunc(fs, name, func(f File, n string) int { return strings.Compare(f.Name, n) })
	if !ok {
		return File{}, false
	}
	return fs[i], true
}

// Names lists the file names in order.
func (fs Files) Names() []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}
