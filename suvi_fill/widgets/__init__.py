"""Notebook widgets: the shared panel, the corpus and filler inspectors, and the live plots of a run's history."""
