"""npy input and output: the header reader both tiers share, the CLI's chunked stream of an .npy file
through a map, and the client's reader of an .npy answer. Above featurehash.maps, below the service and adapters."""
