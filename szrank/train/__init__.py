"""Training the ensemble: the configuration, the metrics with the deployment gate, and the loop that publishes a model."""
