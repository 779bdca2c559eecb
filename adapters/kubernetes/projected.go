package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// VisibleGeneration reads which generation of the files a pod sees in dir, where the
// ConfigMap (and the Secret, or one projected volume holding both) is mounted: the lower
// of the two generation keys the Target writes beside the files, since PgDog reads both
// files and the kubelet projects each object on its own schedule. It is 0 when dir holds
// no ConfigMap marker yet (nothing of Loam's projected).
//
// This is what ConfigPush's AwaitFiles step asks before it reloads an instance: RELOAD
// re-reads the files in the pod, which trail the API objects by up to the kubelet's sync
// period plus its cache TTL (a minute or more by default), so a reload sent as soon as the
// ConfigMap is written re-reads the old files.
func VisibleGeneration(dir string) (uint64, error) {
	cm, err := readMarker(filepath.Join(dir, GenerationKey))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	sec, err := readMarker(filepath.Join(dir, SecretGenerationKey))
	if errors.Is(err, fs.ErrNotExist) {
		return cm, nil // the Secret is mounted elsewhere, or the routers take no credentials file
	}
	if err != nil {
		return 0, err
	}
	return min(cm, sec), nil
}

func readMarker(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	g, err := parseMarker(b)
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s: %w", path, err)
	}
	return g, nil
}

// parseMarker accepts only what the Target writes: the generation (at least 1) in
// canonical decimal and a newline.
func parseMarker(b []byte) (uint64, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if ok && s != "" && s[0] != '0' && strings.TrimLeft(s, "0123456789") == "" {
		if g, err := strconv.ParseUint(s, 10, 64); err == nil {
			return g, nil
		}
	}
	return 0, fmt.Errorf("holds %q, not a generation (want its decimal and a newline, as the Target writes it)", b)
}
