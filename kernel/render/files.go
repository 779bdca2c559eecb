package render

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
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

// Digest is a fingerprint of the files (names and bytes), "sha256:" and 64 hex digits. It
// is what a snapshot keeps instead of the files, which carry every password: whoever holds
// the record and the secrets renders the same files and finds the same digest, and whoever
// holds only the digest learns nothing of the passwords.
func (fs Files) Digest() string {
	h := sha256.New()
	var n [8]byte
	for _, f := range fs {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Name)))
		h.Write(n[:])
		h.Write([]byte(f.Name))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.Data)))
		h.Write(n[:])
		h.Write(f.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// LogValue keeps the files' contents (users.toml holds every password) out of every log
// handler, at any level: a log line shows the names and the digest only.
func (fs Files) LogValue() slog.Value {
	return slog.GroupValue(slog.String("names", strings.Join(fs.Names(), ",")), slog.String("digest", fs.Digest()))
}

// String names the files and their digest, never their contents (fmt's %v and %+v, and the
// text log handler, print this).
func (fs Files) String() string {
	return "files(" + strings.Join(fs.Names(), ",") + ") " + fs.Digest()
}
