package indoubt

import "loam.dev/router/machine"

// Input is what the driver feeds the monitor.
type Input interface{ isInput() }

// Track sets the shards to scan, by name (the record's shard names); it replaces the
// previous set. The first Track starts the rounds.
type Track struct {
	Shards []string
}

// Prepared answers ListPrepared with the shard's prepared transactions (Postgres:
// pg_prepared_xacts of the shard's database), or Err when the shard could not be read.
type Prepared struct {
	Step  string
	Shard string
	Xacts []Xact
	Err   error
}

// Xact is one prepared transaction as the shard reports it.
type Xact struct {
	GID string `json:"gid"`
	// Prepared is when it was prepared, in milliseconds on the driver's clock; 0 when the
	// backend does not say (MySQL's XA RECOVER), and then the monitor dates it from the
	// first scan that saw it.
	Prepared int64  `json:"prepared,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Database string `json:"database,omitempty"`
}

// Roster answers ListInstances with every live router process of the database, or Err
// when they could not be listed (then no new coordinator alert is raised that round: a
// missing roster must not read as "every coordinator is gone").
type Roster struct {
	Step      string
	Processes []Process
	Err       error
}

// Process is one live router process.
type Process struct {
	// ID is the instance id the process writes into its gids: PgDog's SHOW INSTANCE_ID,
	// which is NODE_ID, or 8 random hex digits drawn when this process started.
	ID string `json:"id"`
	// Started is when this process started, in milliseconds on the driver's clock (for a
	// Kubernetes pod, its container's startedAt); 0 when unknown. A process with a stable
	// NODE_ID that started after a transaction was prepared is not the process that
	// prepared it: the coordinator restarted. Without NODE_ID a restart shows as a new
	// random ID, and the old one as gone.
	Started int64 `json:"started,omitempty"`
}

// Delivered answers Alert and ClearAlert: Err is nil when the alert sink took it.
type Delivered struct {
	Step string
	Err  error
}

// TimerFired is the round timer passing (convert with TimerFired(t)).
type TimerFired machine.TimerFired

// Restarted is fed once, first, to a monitor rebuilt by Restore: the replies of the round
// in flight are lost, so a new round starts at once, and every alert delivery not yet
// acknowledged is sent again. Alerts already delivered are not sent again.
type Restarted struct{}

func (Track) isInput()      {}
func (Prepared) isInput()   {}
func (Roster) isInput()     {}
func (Delivered) isInput()  {}
func (TimerFired) isInput() {}
func (Restarted) isInput()  {}
