package cli

// lifecycleCommands are apply, start, stop, restart, status, recreate,
// destroy and purge.
type lifecycleCommands struct{}
