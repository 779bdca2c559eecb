package pglaunch

// Option configures a server started by Start or Server.StartStandby.
type Option func(*config)

type config struct {
	settings [][2]string // postgresql.conf lines, in order; a later one wins
}

// WithSetting adds a postgresql.conf setting, e.g. WithSetting("max_prepared_transactions",
// "10") or WithSetting("wal_level", "logical"). The value is written as a quoted string, which
// Postgres accepts for settings of every type. Settings that need a restart are fine: they
// are in place before the server first starts.
func WithSetting(name, value string) Option {
	return func(c *config) { c.settings = append(c.settings, [2]string{name, value}) }
}

// WithSettings adds several settings; see WithSetting. Map order does not matter, since
// each name appears once.
func WithSettings(settings map[string]string) Option {
	return func(c *config) {
		for name, value := range settings {
			c.settings = append(c.settings, [2]string{name, value})
		}
	}
}

// throwawaySettings make a server fast and quiet at the cost of crash safety, which no
// throwaway server needs. Callers' settings come after them and win.
var throwawaySettings = [][2]string{
	{"fsync", "off"},
	{"synchronous_commit", "off"},
	{"full_page_writes", "off"},
	{"shared_buffers", "32MB"},
	{"max_connections", "50"},
	{"logging_collector", "off"},
	{"log_min_messages", "warning"},
}
