"""Experiments of this paper; see attnlib.experiments."""
