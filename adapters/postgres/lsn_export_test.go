package postgres

// SetRawInsertMutant makes every LSN poller report a primary's insert position without the
// page-boundary normalisation (true) or with it (false, the real behaviour).
func SetRawInsertMutant(on bool) { mutantRawInsert.Store(on) }
