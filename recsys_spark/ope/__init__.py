"""The off-policy wing: a candidate policy's estimates from the logged days."""
