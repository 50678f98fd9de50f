"""The search the ranker speeds up: raw event archives, OBJ files, the population optimiser and the runs with their workers."""
