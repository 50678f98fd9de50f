"""Configurations of twelve planes on a genus-6 topology: the 59 topologies, the defect counters, the fast public-rule counter and imposed symmetries."""
