"""The fillers, classical and learned, their benchmark on the test split, the renderer and the command that fills an archive."""
