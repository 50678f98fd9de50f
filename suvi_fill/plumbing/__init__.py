"""The plumbing every command stands on: exit codes and error types, atomic files, locks, devices and threads, progress, the subcommand table and output directories."""
