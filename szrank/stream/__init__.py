"""The SZTXP001 training stream: its record format, immutable snapshots, bounded-memory batches and a synthetic corpus with a known rule."""
