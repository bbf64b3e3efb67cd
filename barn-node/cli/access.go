package cli

// accessCommands are ssh, exec, ssh-config, logs and provision.
type accessCommands struct{}
