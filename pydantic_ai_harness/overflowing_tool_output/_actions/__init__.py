"""The actions a band runs (`Truncate`, `Spill`, `Summarize`, `Passthrough`), the bands, and the loop that applies them."""
