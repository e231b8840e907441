"""Data-fitted maps: Nystroem, whose parameters are fitted (deterministically) to the landmarks a spec
carries."""
