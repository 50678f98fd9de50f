"""Notebook widgets: the shared panel, the calibration plots and the turnable 3-D view of a configuration."""
