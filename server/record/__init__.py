"""The match log: what makes a match reproducible, recorded as it runs and replayed."""
