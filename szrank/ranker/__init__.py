"""The proposal ranker: its architecture, the member network, the training objective, the features, the SZTRNK01 file and its numpy reference."""
