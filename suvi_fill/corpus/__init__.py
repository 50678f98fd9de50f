"""A built corpus: shards of coded frames, its manifest and segments, the availability model, and the samples the sampler draws from it."""
