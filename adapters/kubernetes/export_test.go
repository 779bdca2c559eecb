package kubernetes

// SetBeforeUpdate runs f between a Target's read of the ConfigMap and its update, so a
// test can put another writer in that window (the race compare-and-set exists for).
func (t *Target) SetBeforeUpdate(f func()) { t.beforeUpdate = f }

// ParseMarker is parseMarker, for the fuzz target.
var ParseMarker = parseMarker
