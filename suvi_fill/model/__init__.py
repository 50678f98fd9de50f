"""The gap-filling network, its losses, the numeric guards and the checkpoint file that holds it."""
