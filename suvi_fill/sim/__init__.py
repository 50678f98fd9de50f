"""The synthetic Sun: a multi-day L2 archive of both satellites with real outage causes, and the figures that compare it with real EUV images."""
