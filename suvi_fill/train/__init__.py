"""A training run: its configuration, its data, its schedules and stopping rules, and the loop that ties them together."""
