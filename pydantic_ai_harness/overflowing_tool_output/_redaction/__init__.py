"""Secret redaction: the rules, the span search, and applying it to a return."""
