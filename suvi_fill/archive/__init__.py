"""SUVI L2 files: their names, headers and data, and the build that reads an archive of them into a corpus."""
