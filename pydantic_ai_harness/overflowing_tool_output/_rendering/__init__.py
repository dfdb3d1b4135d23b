"""One rendering of a tool return, and what the model sees instead of a spill: previews, markers, JSON layouts."""
