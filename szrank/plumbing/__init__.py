"""The plumbing every command stands on: exit codes and error types, exact reads, atomic files, locks, devices and threads, progress and the subcommand table."""
