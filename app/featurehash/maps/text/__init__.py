"""Text into features: the hashing trick (`hashing`), its analyzers and the flattening of text batches."""
